// Makes a replayed page behave the same on every replay: the clock starts at the recording's time and
// random numbers come from a seeded generator. JavaScript because it must run in the page before the page's
// own scripts (`Page.addScriptToEvaluateOnNewDocument`); `trace-replay` fills in the three constants.
(() => {
  const START_MS = __TRACE_START_MS__;
  // When the replay began, by the machine's clock: every document of the replay reads one clock.
  const REPLAY_STARTED_MS = __TRACE_REPLAY_STARTED_MS__;
  let seed = __TRACE_SEED__ >>> 0;

  // The clock: reads the recording's start when the replay starts, then runs at real speed and never
  // back. Code that waits for time to pass (a debounce or throttle that compares `Date.now()` with the
  // last call, an autosave) must see it pass as it did for the person: a clock that moved only as it was
  // read kept such a debounce from ever firing.
  const NativeDate = Date;
  const nativeNow = NativeDate.now;
  let now = START_MS;
  const tick = () => (now = Math.max(now, START_MS + (nativeNow() - REPLAY_STARTED_MS)));
  function ReplayDate(...args) {
    if (!new.target) return new NativeDate(tick()).toString();
    return args.length === 0 ? new NativeDate(tick()) : new NativeDate(...args);
  }
  ReplayDate.prototype = NativeDate.prototype;
  ReplayDate.now = tick;
  ReplayDate.parse = NativeDate.parse;
  ReplayDate.UTC = NativeDate.UTC;
  Object.defineProperty(ReplayDate.prototype, "constructor", { value: ReplayDate });
  globalThis.Date = ReplayDate;

  // mulberry32: small, fast, and good enough for pages; the point is that it is seeded.
  const next = () => {
    seed = (seed + 0x6d2b79f5) >>> 0;
    let t = seed;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  Math.random = next;
  const webCrypto = globalThis.crypto;
  if (webCrypto && webCrypto.getRandomValues) {
    webCrypto.getRandomValues = function getRandomValues(array) {
      const bytes = new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
      for (let i = 0; i < bytes.length; i += 1) bytes[i] = Math.floor(next() * 256);
      return array;
    };
  }
  if (webCrypto && webCrypto.randomUUID) {
    webCrypto.randomUUID = function randomUUID() {
      const hex = [...Array(32)].map(() => Math.floor(next() * 16).toString(16));
      hex[12] = "4";
      hex[16] = ((parseInt(hex[16], 16) & 0x3) | 0x8).toString(16);
      const h = hex.join("");
      return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
    };
  }
})();
