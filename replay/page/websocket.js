// Plays the recording's WebSockets back to the page. JavaScript because sockets never pass through
// DevTools' `Fetch`, which answers every request of a replay: the only place to answer a socket is the
// page's own `WebSocket` API, replaced here before the page's scripts run. `trace-replay` fills in the
// transcripts (each recorded socket's URL and its frames both ways, in order).
//
// A page that opens a recorded URL gets a socket that opens at once and plays the server's frames that
// came before the page's first one. Each frame the page sends is matched with the next recorded frame the
// page sent that equals it (as JSON with its keys sorted, when it parses as JSON), else that equals it but
// for its ids (runs of 8 or more letters, digits, `-` and `_` with a digit in them: a conversation id the
// page made with `Math.random()` differs from the recorded one), else with the next one in order; the
// server's frames that followed it in the recording are then played. An id matched that way is the page's
// from then on: the server's frames played on that socket carry the page's value where the recording had
// its own, as the server would have echoed it. The n-th socket opened
// to a URL plays the n-th recorded one (the last one again once they are used up). Sockets to URLs never
// recorded are the browser's own, which reach nothing in an offline replay. What matched and what did not
// is counted for the re-run's report, in the tab's session storage (under the name below) so that the
// counts add up across the tab's documents of one origin. A worker, which has no session storage, runs this
// script too (at the head of its own) and sends its counts to its page's top document on a broadcast channel
// of the same name (every top document of the origin hears it: with two such tabs open, both count it).
(() => {
  const RECORDED = __TRACE_WEBSOCKETS__;
  const NativeWebSocket = globalThis.WebSocket;
  if (!NativeWebSocket || !RECORDED.length) return;
  const COUNTS = "__trace_replay_websocket_frames__";
  let stats = { matched: 0, unmatched: 0, played: 0 };
  try {
    stats = { ...stats, ...JSON.parse(sessionStorage.getItem(COUNTS) || "{}") };
  } catch {
    // No session storage here (an opaque origin): the counts stay in this document.
  }
  const add = (what) => {
    if (!(what in stats)) return;
    stats[what] += 1;
    try {
      sessionStorage.setItem(COUNTS, JSON.stringify(stats));
    } catch {}
  };
  const inWorker = typeof WorkerGlobalScope === "function" && globalThis instanceof WorkerGlobalScope;
  const isTop = !inWorker && typeof window === "object" && window.top === window;
  // Only where it carries something: an open channel keeps a script host (Node, in the tests) running.
  const channel = (inWorker || isTop) && typeof BroadcastChannel === "function" ? new BroadcastChannel(COUNTS) : null;
  if (channel && isTop) channel.onmessage = (event) => add(event.data);
  const count = (what) => (inWorker && channel ? channel.postMessage(what) : add(what));
  const opened = new Map();
  const sorted = (value) =>
    Array.isArray(value)
      ? value.map(sorted)
      : value && typeof value === "object"
        ? Object.fromEntries(Object.keys(value).sort().map((key) => [key, sorted(value[key])]))
        : value;
  const canonical = (text) => {
    try {
      return JSON.stringify(sorted(JSON.parse(text)));
    } catch {
      return text;
    }
  };
  const bytes = (base64) => Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
  const ID = /[A-Za-z0-9_-]{8,256}/g;
  const ids = (text) => (text.match(ID) || []).filter((token) => /[0-9]/.test(token));
  const template = (text) => text.replace(ID, (token) => (/[0-9]/.test(token) ? "\u0000" : token));

  class WebSocket extends EventTarget {
    constructor(url, protocols) {
      super();
      const absolute = new URL(url, location.href).href;
      const transcripts = RECORDED.filter((socket) => socket.url === absolute);
      if (!transcripts.length) return new NativeWebSocket(url, protocols);
      const count = opened.get(absolute) || 0;
      opened.set(absolute, count + 1);
      this._frames = transcripts[Math.min(count, transcripts.length - 1)].frames;
      this._next = 0;
      // Recorded id → the page's own (see above).
      this._ids = new Map();
      this.url = absolute;
      this.readyState = WebSocket.CONNECTING;
      this.protocol = Array.isArray(protocols) ? protocols[0] || "" : protocols || "";
      this.extensions = "";
      this.bufferedAmount = 0;
      this.binaryType = "blob";
      this.onopen = this.onmessage = this.onerror = this.onclose = null;
      setTimeout(() => {
        if (this.readyState !== WebSocket.CONNECTING) return;
        this.readyState = WebSocket.OPEN;
        this._fire(new Event("open"));
        this._play();
      });
    }

    _fire(event) {
      this.dispatchEvent(event);
      const handler = this["on" + event.type];
      if (typeof handler === "function") handler.call(this, event);
    }

    // The server's frames from here up to the page's next one, each in a task of its own.
    _play() {
      while (this._next < this._frames.length && !this._frames[this._next].sent) {
        const frame = this._frames[this._next++];
        count("played");
        setTimeout(() => {
          if (this.readyState !== WebSocket.OPEN) return;
          let data = frame.binary ? frame.data : frame.data.replace(ID, (token) => this._ids.get(token) ?? token);
          if (frame.binary) data = this.binaryType === "arraybuffer" ? bytes(data).buffer : new Blob([bytes(data)]);
          this._fire(new MessageEvent("message", { data, origin: new URL(this.url).origin }));
        });
      }
    }

    send(data) {
      if (this.readyState === WebSocket.CONNECTING) throw new DOMException("Still in CONNECTING state.", "InvalidStateError");
      if (this.readyState !== WebSocket.OPEN) return;
      const text = typeof data === "string" ? canonical(data) : null;
      let match = -1;
      let alike = -1;
      let next = -1;
      for (let i = this._next; i < this._frames.length; i++) {
        if (!this._frames[i].sent) continue;
        if (next < 0) next = i;
        if (text === null || this._frames[i].binary) continue;
        const recorded = canonical(this._frames[i].data);
        if (recorded === text) {
          match = i;
          break;
        }
        if (alike < 0 && template(recorded) === template(text)) alike = i;
      }
      if (match < 0 && alike >= 0) {
        match = alike;
        const theirs = ids(canonical(this._frames[alike].data));
        ids(text).forEach((mine, k) => {
          if (mine !== theirs[k]) this._ids.set(theirs[k], mine);
        });
      }
      count(match >= 0 ? "matched" : "unmatched");
      const at = match >= 0 ? match : next;
      if (at < 0) return;
      this._next = at + 1;
      this._play();
    }

    close(code = 1000, reason = "") {
      if (this.readyState >= WebSocket.CLOSING) return;
      this.readyState = WebSocket.CLOSED;
      setTimeout(() => this._fire(new CloseEvent("close", { code, reason, wasClean: true })));
    }
  }
  for (const [name, value] of Object.entries({ CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3 })) {
    Object.defineProperty(WebSocket, name, { value });
    Object.defineProperty(WebSocket.prototype, name, { value });
  }
  globalThis.WebSocket = WebSocket;
})();
