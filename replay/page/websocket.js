// Plays the recording's WebSockets back to the page. JavaScript because sockets never pass through
// DevTools' `Fetch`, which answers every request of a replay: the only place to answer a socket is the
// page's own `WebSocket` API, replaced here before the page's scripts run. `trace-replay` fills in the
// transcripts (each recorded socket's URL and its frames both ways, in order).
//
// A page that opens a recorded URL gets a socket that opens at once and plays the server's frames that
// came before the page's first one. A URL that equals a recorded one but for its ids (runs of 8 or more
// letters, digits, `-` and `_` with a digit in them: a session id the page made with `crypto` or
// `Math.random()` differs from the recorded one), else has its shape (see `sameShape`), is that recorded
// URL, its ids paired as below. Each frame
// the page sends is matched with the earliest recorded frame the page sent, not matched yet, that equals it
// (text as JSON with its keys sorted, when it parses as JSON; binary byte for byte), else that equals it
// but for its ids and the times written in it, else with the earliest not matched yet of its kind (see
// `describe`); the server's frames that followed that one in the recording, up to the page's next one, are
// then played (a page that sends two requests at once may send them the other way round, and each gets its
// own answer). A frame of a kind no recorded frame left has is answered with nothing, and so is chatter (an
// acknowledgement, a liveness signal) that equals none: the page sends it on its own clock, and the server's
// frames that followed the recording's are no answer to it (answered with the next request's, NiceGUI's
// acknowledgement moved its slider a step ahead of the keys pressed). An id matched that
// way is the page's from then on: the server's frames played on that socket carry the page's value where
// the recording had its own, as the server would have echoed it (in a binary frame only where both have the
// same length, which keeps the frame's own offsets true: a kernel's `msg_id`s, UUIDs, do). The n-th socket
// opened to a URL plays the n-th recorded one (the last one again once they are used up). Sockets to URLs
// never recorded are the browser's own, which reach nothing in an offline replay. What matched and what did not
// is counted for the re-run's report, in the tab's session storage (under the name below) so that the
// counts add up across the tab's documents of one origin. A worker, which has no session storage, runs this
// script too (at the head of its own) and sends its counts to its page's top document on a broadcast channel
// of the same name (every top document of the origin hears it: with two such tabs open, both count it).
//
// Where the replay records a session (`trace-replay eval`, the audit), the sockets opened and the text frames
// the page sent are reported through the DevTools binding named below, as the recorder records them.
//
// A server's frame the recording has after a write the page made over HTTP (`after`: `POST /flows`, a deploy
// whose notifications the server pushed) is played once the page has made that write since its last frame
// on the socket (its `fetch` or `XMLHttpRequest` answered), not at once: the frames after it wait with it.
// The ids in the recorded write's body (`after_body`) are paired with those in the page's, as a frame's are
// (a deploy names the nodes the page made, whose ids a replayed page draws anew; the server's pushes name
// them too).
(() => {
  const RECORDED = __TRACE_WEBSOCKETS__;
  const NativeWebSocket = globalThis.WebSocket;
  if (!NativeWebSocket || !RECORDED.length) return;
  const COUNTS = "__trace_replay_websocket_frames__";
  const REPORT = __TRACE_SOCKET_BINDING__;
  // Frames larger than this are reported without their data: a session records what a person's action sends.
  const REPORTED_CHARS = 65536;
  let reported = 0;
  const report = (message) => {
    const binding = globalThis[REPORT];
    if (typeof binding !== "function") return;
    try {
      binding(JSON.stringify(message));
    } catch {
      // A binding the page replaced or removed: nothing to tell.
    }
  };
  let stats = { matched: 0, unmatched: 0, chatter: 0, played: 0 };
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
  // The sockets playing back, to hear of the page's writes.
  const live = new Set();
  // `body` is the write's text, null when it was not text.
  const wrote = (method, url, body) => {
    let key;
    try {
      key = `${String(method || "GET").toUpperCase()} ${new URL(url, location.href).pathname}`;
    } catch {
      return;
    }
    for (const socket of live) socket._wrote(key, typeof body === "string" ? body : null);
  };
  // Whether the write the page made (`METHOD /path`) is the one a recorded frame followed: the same method,
  // and the same path but for segments with a digit in both, ids the page may draw anew (Node-RED's
  // `POST /inject/{node id}`, a node made in the replay by seeded random numbers).
  const sameWrite = (recorded, made) => {
    const [recordedMethod, recordedPath = ""] = recorded.split(" ");
    const [madeMethod, madePath = ""] = made.split(" ");
    const recordedSegments = recordedPath.split("/");
    const madeSegments = madePath.split("/");
    const id = /[0-9]/;
    return recordedMethod === madeMethod && recordedSegments.length === madeSegments.length &&
      recordedSegments.every((segment, at) =>
        segment === madeSegments[at] || (id.test(segment) && id.test(madeSegments[at])));
  };
  const nativeFetch = globalThis.fetch;
  if (typeof nativeFetch === "function") {
    globalThis.fetch = function fetch(input, init) {
      const answered = nativeFetch.apply(this, arguments);
      const method = (init && init.method) || (input && typeof input === "object" && input.method) || "GET";
      const url = input && typeof input === "object" && "url" in input ? input.url : String(input);
      const body = init && init.body;
      answered.then(() => wrote(method, url, body), () => {});
      return answered;
    };
  }
  const beacon = globalThis.navigator && globalThis.navigator.sendBeacon;
  if (typeof beacon === "function") {
    globalThis.navigator.sendBeacon = function sendBeacon(url) {
      const queued = beacon.apply(this, arguments);
      if (queued) wrote("POST", url, arguments[1]);
      return queued;
    };
  }
  const Xhr = globalThis.XMLHttpRequest;
  if (Xhr) {
    const { open, send } = Xhr.prototype;
    Xhr.prototype.open = function (method, url) {
      this.__traceReplayWrite = [method, url];
      return open.apply(this, arguments);
    };
    Xhr.prototype.send = function () {
      const [method, url] = this.__traceReplayWrite || [];
      const body = arguments[0];
      this.addEventListener("load", () => wrote(method, url, body), { once: true });
      return send.apply(this, arguments);
    };
  }
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
  // Binary payloads are compared and rewritten as strings of one character per byte (what `atob` gives).
  const bytes = (binary) => Uint8Array.from(binary, (c) => c.charCodeAt(0));
  const binaryOf = (data) => {
    const view = data instanceof ArrayBuffer ? new Uint8Array(data) : ArrayBuffer.isView(data) ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength) : null;
    if (!view) return null; // a Blob, which cannot be read at once
    let binary = "";
    for (let i = 0; i < view.length; i += 0x8000) binary += String.fromCharCode(...view.subarray(i, i + 0x8000));
    return binary;
  };
  // What a text frame says it is (`trace_analysis::websocket::FRAME_KIND_NAMES`): the top-level strings with
  // no digit of an array (Socket.IO's `42["event", …]`: the digits a protocol puts first are skipped), else
  // the strings under these names of an object (`{"type": "ack"}`). Its kind, to be compared, is the first
  // of an array's (the later ones may be what the person wrote: `["chat message", "hello"]`) or all of an
  // object's, null when there is none (a frame that is not JSON); it is chatter when any is a chatter word.
  const KIND_NAMES = __TRACE_FRAME_KIND_NAMES__;
  const CHATTER = __TRACE_CHATTER_KINDS__;
  const describe = (text) => {
    let value;
    try {
      value = JSON.parse(text.replace(/^[0-9]+/, ""));
    } catch {
      return { kind: null, chatter: false };
    }
    const array = Array.isArray(value);
    const named = array ? value : value && typeof value === "object" ? KIND_NAMES.map((name) => value[name]) : [];
    const words = named.filter((word) => typeof word === "string" && !/[0-9]/.test(word));
    const kind = (array ? words.slice(0, 1) : words).join("\u0000") || null;
    return { kind, chatter: words.some((word) => CHATTER.includes(word.toLowerCase())) };
  };
  const ID = /[A-Za-z0-9_-]{8,256}/g;
  // A time the page wrote into what it sends (a message header's `date`) is the page's clock, not the conversation.
  const CLOCK = /\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)?/g;
  const unclocked = (text) => text.replace(CLOCK, "\u0001");
  // What a redacted bundle holds in place of a secret the page made (a session id in the URL) stands for an
  // id, whether or not the part of it a frame keeps has a digit.
  const STAND_IN = __TRACE_PLACEHOLDER_PREFIX__;
  const isId = (token) => /[0-9]/.test(token) || token.startsWith(STAND_IN);
  const ids = (text) => (unclocked(text).match(ID) || []).filter(isId);
  const template = (text) => unclocked(text).replace(ID, (token) => (isId(token) ? "\u0000" : token));
  // Pairs each recorded id with the page's in the same place, where they differ.
  const pair = (map, recorded, page) => {
    const theirs = ids(recorded);
    ids(page).forEach((mine, k) => {
      if (theirs[k] !== undefined && mine !== theirs[k]) map.set(theirs[k], mine);
    });
  };
  // Whether two URLs have the same shape: the same origin and query names, and path segments that are
  // equal, or of the same length and made only of letters, digits, `-` and `_` (SockJS puts a server number
  // and a session id of 8 random characters, which may have no digit, in its path).
  const segmentsOf = (url) => url.pathname.split("/");
  const namesOf = (url) => [...url.searchParams.keys()].join("&");
  const sameShape = (a, b) => {
    const [x, y] = [new URL(a), new URL(b)];
    const [p, q] = [segmentsOf(x), segmentsOf(y)];
    return x.origin === y.origin && namesOf(x) === namesOf(y) && p.length === q.length &&
      p.every((segment, k) => segment === q[k] || (segment.length === q[k].length && /^[\w-]+$/.test(segment) && /^[\w-]+$/.test(q[k])));
  };
  // The recorded sockets a URL opens: those of that URL, else those whose URL is it but for its ids, else
  // those of its shape; with the recorded URL's values paired with the page's where they differ.
  const recordedFor = (absolute) => {
    const exact = RECORDED.filter((socket) => socket.url === absolute);
    if (exact.length) return exact;
    const shape = template(absolute);
    const alike = RECORDED.filter((socket) => template(socket.url) === shape);
    return alike.length ? alike : RECORDED.filter((socket) => sameShape(socket.url, absolute));
  };
  const pairUrls = (map, recorded, page) => {
    pair(map, recorded, page);
    const [p, q] = [segmentsOf(new URL(recorded)), segmentsOf(new URL(page))];
    if (p.length === q.length) p.forEach((segment, k) => segment !== q[k] && !map.has(segment) && map.set(segment, q[k]));
  };

  class WebSocket extends EventTarget {
    constructor(url, protocols) {
      super();
      const absolute = new URL(url, location.href).href;
      const transcripts = recordedFor(absolute);
      if (!transcripts.length) return new NativeWebSocket(url, protocols);
      const count = opened.get(transcripts[0].url) || 0;
      opened.set(transcripts[0].url, count + 1);
      const transcript = transcripts[Math.min(count, transcripts.length - 1)];
      this._frames = transcript.frames;
      // The recorded frames the page sent that a frame of this page has matched.
      this._used = new Set();
      // The writes the page made since its last frame, and where play waits for one (see above).
      this._writes = new Set();
      this._waiting = [];
      // The recorded writes whose bodies have been paired with one of the page's, by their first frame.
      this._pairedWrites = new Set();
      // Recorded id → the page's own (see above), from the URL first.
      this._ids = new Map();
      pairUrls(this._ids, transcript.url, absolute);
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
        live.add(this);
        this._reportedAs = `replayed-${(reported += 1)}`;
        report({ op: "opened", id: this._reportedAs, url: absolute });
        this._fire(new Event("open"));
        this._play(0);
      });
    }

    _fire(event) {
      this.dispatchEvent(event);
      const handler = this["on" + event.type];
      if (typeof handler === "function") handler.call(this, event);
    }

    // A write the page made: its ids are paired with the recorded write's, and frames waiting for it play.
    _wrote(key, body) {
      const recorded = body === null ? -1 : this._frames.findIndex((frame, at) =>
        frame.after_body !== undefined && !this._pairedWrites.has(at) && sameWrite(frame.after, key));
      if (recorded >= 0) {
        this._pairedWrites.add(recorded);
        pair(this._ids, this._frames[recorded].after_body, body);
      }
      this._writes.add(key);
      const ready = this._waiting.filter((at) => sameWrite(this._frames[at].after, key));
      this._waiting = this._waiting.filter((at) => !ready.includes(at));
      for (const at of ready) this._play(at);
    }

    // The server's frames from `next` up to the page's next one, each in a task of its own; from one that
    // waits for a write the page has not made, later.
    _play(next) {
      for (; next < this._frames.length && !this._frames[next].sent; next++) {
        const frame = this._frames[next];
        if (frame.after && ![...this._writes].some((made) => sameWrite(frame.after, made))) {
          this._waiting.push(next);
          return;
        }
        count("played");
        setTimeout(() => {
          if (this.readyState !== WebSocket.OPEN) return;
          let data;
          if (frame.binary) {
            const same = (token) => (this._ids.get(token)?.length === token.length ? this._ids.get(token) : token);
            const payload = bytes(atob(frame.data).replace(ID, same));
            data = this.binaryType === "arraybuffer" ? payload.buffer : new Blob([payload]);
          } else {
            data = frame.data.replace(ID, (token) => this._ids.get(token) ?? token);
          }
          this._fire(new MessageEvent("message", { data, origin: new URL(this.url).origin }));
        });
      }
    }

    send(data) {
      if (this.readyState === WebSocket.CONNECTING) throw new DOMException("Still in CONNECTING state.", "InvalidStateError");
      if (this.readyState !== WebSocket.OPEN) return;
      const binary = typeof data !== "string";
      if (!binary) report({ op: "sent", id: this._reportedAs, data: data.length <= REPORTED_CHARS ? data : null });
      const text = binary ? binaryOf(data) : canonical(data);
      // Compared forms of each recorded frame, worked out once (a long conversation is searched often).
      const recordedOf = (frame) => (frame.key ??= frame.binary ? atob(frame.data) : canonical(frame.data));
      const shapeOf = (frame) => (frame.shape ??= template(recordedOf(frame)));
      const kindOfFrame = (frame) => ("kind" in frame ? frame.kind : (frame.kind = frame.binary ? null : describe(frame.data).kind));
      const shape = text === null ? null : template(text);
      const { kind, chatter } = binary ? { kind: null, chatter: false } : describe(data);
      let match = -1;
      let alike = -1;
      let next = -1;
      // Any frame not yet matched, earliest first: a page that sends two requests at once may send them in
      // the other order, and each is answered by what followed it in the recording.
      for (let i = 0; i < this._frames.length; i++) {
        const frame = this._frames[i];
        if (!frame.sent || this._used.has(i)) continue;
        if (next < 0 && kindOfFrame(frame) === kind) next = i;
        if (text === null || frame.binary !== binary) continue;
        if (recordedOf(frame) === text) {
          match = i;
          break;
        }
        if (alike < 0 && shapeOf(frame) === shape) alike = i;
      }
      if (match < 0 && alike >= 0) {
        match = alike;
        pair(this._ids, recordedOf(this._frames[alike]), text);
      }
      count(match >= 0 ? "matched" : chatter ? "chatter" : "unmatched");
      const at = match >= 0 ? match : chatter ? -1 : next;
      if (at < 0) return;
      this._used.add(at);
      this._writes.clear();
      this._play(at + 1);
    }

    close(code = 1000, reason = "") {
      if (this.readyState >= WebSocket.CLOSING) return;
      this.readyState = WebSocket.CLOSED;
      live.delete(this);
      setTimeout(() => this._fire(new CloseEvent("close", { code, reason, wasClean: true })));
    }
  }
  for (const [name, value] of Object.entries({ CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3 })) {
    Object.defineProperty(WebSocket, name, { value });
    Object.defineProperty(WebSocket.prototype, name, { value });
  }
  globalThis.WebSocket = WebSocket;
})();
