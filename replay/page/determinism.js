// Makes a replayed page behave the same on every replay: the clock starts at the recording's time and
// random numbers come from a seeded generator. JavaScript because it must run in the page before the page's
// own scripts (`Page.addScriptToEvaluateOnNewDocument`); `trace-replay` fills in the two constants.
(() => {
  const START_MS = __TRACE_START_MS__;
  let seed = __TRACE_SEED__ >>> 0;

  // The clock: starts at the recording's start and moves one millisecond per reading, so that code which
  // waits for time to pass still sees it pass, yet every replay reads the same times in the same order.
  let now = START_MS;
  const tick = () => (now += 1);
  const NativeDate = Date;
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
