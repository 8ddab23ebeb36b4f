// Finds the element a recorded call acts on, and acts on it, in the replayed page. JavaScript because the
// search goes through the page's own documents (its same-origin iframes' too, and shadow roots) and the
// actions are the page's own DOM operations, which only code running in the page can reach.
// `trace-replay` evaluates this expression and calls `locate` or `act` on what it gives, with every argument
// written as JSON (see `replay/src/run/locator.rs`): no text of the recording is ever spliced in as code.
(() => {
  // Finds an element from the top document: through the frame path's iframes, then by selector (a ` >>> `
  // enters a shadow root), then by XPath. Returns the element, or null.
  const find = (framePath, selector, xpath) => {
    let doc = document;
    for (const frame of framePath) {
      const element = doc.querySelector(frame);
      try { doc = element && element.contentDocument; } catch { doc = null; }
      if (!doc) return null;
    }
    let root = doc, element = null;
    try {
      for (const part of selector.split(" >>> ")) {
        element = root.querySelector(part);
        root = element && element.shadowRoot;
        if (!element) break;
      }
    } catch { element = null; }
    if (!element && xpath) element = doc.evaluate(xpath, doc, null, XPathResult.FIRST_ORDERED_NODE_TYPE, null).singleNodeValue;
    return element;
  };

  // What `act` does to an element, by name (`ElementAction` in `locator.rs`).
  const actions = {
    // A field's value as the recorder reads it: a rich editor's text, or a form field's value; `null` for
    // anything else.
    fieldValue: (field) => field.isContentEditable ? field.innerText : (typeof field.value === "string" ? field.value : null),
    // Sets a field's value as its own widget does, with the events that follow.
    setValue: (field, value) => {
      field.value = value;
      field.dispatchEvent(new Event("input", { bubbles: true }));
      field.dispatchEvent(new Event("change", { bubbles: true }));
      return null;
    },
    selectOptions: (select, option) => {
      const wanted = option.split(", ");
      let found = false;
      for (const o of select.options) {
        o.selected = wanted.includes((o.label || o.text).trim()) || wanted.includes(o.value);
        found = found || o.selected;
      }
      select.dispatchEvent(new Event("input", { bubbles: true }));
      select.dispatchEvent(new Event("change", { bubbles: true }));
      return found;
    },
    // Chooses the first option that is not among the recorded ones (one, or as many as were chosen).
    selectAnotherOption: (select, option) => {
      const recorded = option.split(", ");
      const other = [...select.options].find((o) => !recorded.includes((o.label || o.text).trim()) && !recorded.includes(o.value));
      if (!other) return false;
      for (const o of select.options) o.selected = o === other;
      select.dispatchEvent(new Event("input", { bubbles: true }));
      select.dispatchEvent(new Event("change", { bubbles: true }));
      return true;
    },
    submit: (form) => form.requestSubmit(),
    focus: (element) => element.focus(),
  };

  return {
    // Scrolls the element into view (unless `stay`) and gives its centre in the tab's viewport, adding up the
    // offsets of the iframes on the way; inside a cross-origin iframe, that iframe's offset.
    locate: (framePath, selector, xpath, stay = false) => {
      let doc = document, frames = [];
      for (const frame of framePath) {
        const element = doc.querySelector(frame);
        if (!element) return { error: "no iframe " + frame };
        frames.push(element);
        let inner = null;
        try { inner = element.contentDocument; } catch {}
        if (!inner) {
          if (!stay) element.scrollIntoView({ block: "center" });
          let left = 0, top = 0;
          for (const f of frames) { const r = f.getBoundingClientRect(); left += r.x + f.clientLeft; top += r.y + f.clientTop; }
          return { cross_origin: true, left, top };
        }
        doc = inner;
      }
      const bySelector = find(framePath, selector, null);
      const element = bySelector || find(framePath, selector, xpath);
      if (!element) return { error: "no element" };
      const byXpath = !bySelector;
      if (!stay) element.scrollIntoView({ block: "center", inline: "center" });
      const box = element.getBoundingClientRect();
      const visible = box.width > 0 && box.height > 0 && element.checkVisibility({ visibilityProperty: true });
      let left = 0, top = 0;
      for (const f of frames) { const r = f.getBoundingClientRect(); left += r.x + f.clientLeft; top += r.y + f.clientTop; }
      return { x: left + box.x + box.width / 2, y: top + box.y + box.height / 2, width: box.width, height: box.height,
               visible, by: byXpath ? "xpath" : "selector" };
    },
    // Runs the action named `action` on the element, with `argument`: `{value}`, or `{missing: true}`.
    act: (action, argument, framePath, selector, xpath) => {
      const element = find(framePath, selector, xpath);
      if (!element) return { missing: true };
      return { value: actions[action](element, argument) ?? null };
    },
  };
})()
