// Tells replay about each WebRTC connection the page gives somewhere to reach, which replay counts as a
// live attempt: WebRTC never passes through DevTools' `Fetch` and DevTools reports no event for it, so the
// only place to see one is the page's own `RTCPeerConnection`, wrapped here before the page's scripts run.
// (The connection itself is left alone; the browser's flags keep its packets from leaving.)
// A connection reaches out through its ICE servers (STUN, TURN) or to the remote candidates it is given,
// and is reported once, at the first of: built with ICE servers, given some (`setConfiguration`), set to
// gather with some (`setLocalDescription`, for a connection built by a constructor not wrapped here, as
// `RTCPeerConnection.prototype.constructor` is), given a remote candidate (`addIceCandidate`, or a remote
// description carrying `a=candidate` lines). `webkitRTCPeerConnection`, Chromium's old name for the same
// constructor, is the wrapped one too.
// `trace-replay` fills in the name of the DevTools binding that carries the report.
(() => {
  const Native = globalThis.RTCPeerConnection;
  if (typeof Native !== "function") return;
  // Looked up at each report: DevTools installs the binding in a new document after scripts like this one.
  const report = (reached) => {
    const binding = globalThis.__TRACE_LIVE_BINDING__;
    if (typeof binding === "function") binding(reached);
  };
  const reported = new WeakSet();
  // Never throws: the page must see the browser's own behaviour, whatever it passes.
  const reportOnce = (connection, reached) => {
    try {
      const what = reached();
      if (!what || !(connection instanceof Native) || reported.has(connection)) return;
      reported.add(connection);
      report(what);
    } catch {}
  };
  const servers = (configuration) =>
    (configuration?.iceServers ?? []).flatMap((server) => [].concat(server?.urls ?? server?.url ?? [])).join(" ");
  const candidates = (description) =>
    String(description?.sdp ?? "")
      .split(/\r?\n/)
      .filter((line) => line.startsWith("a=candidate:"))
      .join(" ");

  const Wrapped = new Proxy(Native, {
    construct(target, args, newTarget) {
      const connection = Reflect.construct(target, args, newTarget);
      reportOnce(connection, () => servers(args[0]));
      return connection;
    },
  });
  globalThis.RTCPeerConnection = Wrapped;
  if ("webkitRTCPeerConnection" in globalThis) globalThis.webkitRTCPeerConnection = Wrapped;

  // Each method reports, then does what it always did with the arguments it was given.
  const wrap = (name, reached) => {
    const original = Native.prototype[name];
    if (typeof original !== "function") return;
    Native.prototype[name] = {
      [name](...args) {
        reportOnce(this, () => reached(this, args));
        return Reflect.apply(original, this, args);
      },
    }[name];
  };
  wrap("setConfiguration", (_, [configuration]) => servers(configuration));
  wrap("setLocalDescription", (connection) => servers(connection.getConfiguration()));
  wrap("setRemoteDescription", (_, [description]) => candidates(description));
  wrap("addIceCandidate", (_, [candidate]) => String(candidate?.candidate ?? "").trim());
})();
