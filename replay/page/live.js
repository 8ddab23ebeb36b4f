// Tells replay about each WebRTC connection the page makes with ICE servers, which replay counts as a
// live attempt: WebRTC never passes through DevTools' `Fetch` and DevTools reports no event for it, so the
// only place to see one is the page's own `RTCPeerConnection` constructor, wrapped here before the page's
// scripts run. (The connection itself is left alone; the browser's flags keep its packets from leaving.)
// `trace-replay` fills in the name of the DevTools binding that carries the report.
(() => {
  const Native = globalThis.RTCPeerConnection;
  if (typeof Native !== "function") return;
  // Looked up at each report: DevTools installs the binding in a new document after scripts like this one.
  const report = (servers) => {
    const binding = globalThis.__TRACE_LIVE_BINDING__;
    if (typeof binding === "function") binding(servers);
  };
  globalThis.RTCPeerConnection = new Proxy(Native, {
    construct(target, args, newTarget) {
      const servers = (args[0]?.iceServers ?? []).flatMap((server) => [].concat(server?.urls ?? server?.url ?? []));
      if (servers.length) report(servers.join(" "));
      return Reflect.construct(target, args, newTarget);
    },
  });
})();
