// The page's half of telling the person's input from the page's own: it runs in the page's main world, at
// the start of every document (iframes included), before the page's scripts, and marks the moments a page
// script makes the browser act as if a person had: `document.execCommand` (a trusted `input`) and
// `form.requestSubmit` (a trusted `submit`). Each marked call first dispatches `__trace_scripted` on the
// document; the capture script (`capture.js`, in its isolated world) takes the input or submit that the call
// fires before its task ends as the page's. Text that arrives with no key at all (autofill, a paste or a
// drop, an IME commit, `Input.insertText`) is never marked: it is the person's.
//
// A call made while the browser delivers a person's gesture to the element it acts on (a rich editor that
// inserts the key it was given, a Save button whose click submits its form) is on the person's behalf and
// is not marked. A page that forges a mark only makes its own input look more like the page's.
//
// JavaScript and not Rust because it must run in the page's own world, before the page's scripts; it
// holds no state a page could read and reports nothing but the mark.
(() => {
  const MARK = "__trace_scripted";
  const GESTURES = new Set([
    "keydown", "keypress", "keyup", "beforeinput", "input", "paste", "drop", "compositionend",
    "mousedown", "mouseup", "click", "pointerdown", "pointerup", "touchend",
  ]);
  // Taken before the page's scripts run: a page that replaces them later changes nothing here.
  const dispatch = EventTarget.prototype.dispatchEvent;
  const contains = Node.prototype.contains;
  const MarkEvent = Event;
  // `window.event` is the event the browser is delivering while its listeners run.
  const eventGetter = Object.getOwnPropertyDescriptor(window, "event")?.get;
  const onBehalfOfPerson = (acted) => {
    const event = eventGetter ? eventGetter.call(window) : undefined;
    if (!event || !event.isTrusted || !GESTURES.has(event.type) || !acted) return false;
    const related = (target) =>
      target instanceof Node && (target === acted || contains.call(acted, target) || contains.call(target, acted));
    // The innermost target, and the one retargeted to the document's tree (a shadow root's host).
    return related(event.composedPath()[0]) || related(event.target);
  };
  const wrap = (prototype, name, actedOn) => {
    const original = prototype[name];
    if (typeof original !== "function") return;
    const wrapped = {
      [name](...args) {
        if (!onBehalfOfPerson(actedOn(this))) dispatch.call(document, new MarkEvent(MARK));
        return original.apply(this, args);
      },
    }[name];
    Object.defineProperty(prototype, name, { value: wrapped, writable: true, configurable: true });
  };
  wrap(Document.prototype, "execCommand", (doc) => doc.activeElement);
  wrap(HTMLFormElement.prototype, "requestSubmit", (form) => form);
})();
