// The in-page half of the TRACE recorder: it reports the person's actions, each with a description of the
// element acted on, and a bounded count of DOM mutations.
//
// JavaScript and not Rust because it runs inside the recorded pages, and many pages send a
// Content-Security-Policy under which WebAssembly cannot compile. The service worker injects it through the
// DevTools protocol into an isolated world named "trace" (`Page.addScriptToEvaluateOnNewDocument`), where the
// page's CSP does not apply and the page's own scripts can neither see nor alter it. It reports through the
// DevTools binding `__traceEmit` (`Runtime.addBinding`). It decides as little as it can: coalescing of typing,
// and every check of what it reports, happen in Rust (trace-capture's `actions`).
(() => {
  if (globalThis.__traceCaptureInstalled) return; // injected both into new documents and into the current one
  globalThis.__traceCaptureInstalled = true;

  const TEXT_LIMIT = 200;
  const emit = (message) => {
    // The binding appears once the service worker has added it; until then there is nobody to tell.
    if (typeof globalThis.__traceEmit === "function") globalThis.__traceEmit(JSON.stringify(message));
  };
  // Every listener this script adds to the window, so that they can be added again where the page erased
  // them (see the end of the script).
  const registrations = [];
  const on = (type, handler, options) => {
    registrations.push([type, handler, options]);
    window.addEventListener(type, handler, options);
  };

  // ---- Describing an element -------------------------------------------------------------------------

  const clip = (text) => {
    const clean = (text || "").replace(/\s+/g, " ").trim();
    return clean ? clean.slice(0, TEXT_LIMIT) : undefined;
  };

  // Ids made by frameworks (`:r1:`, `ember123`, hex runs) change from load to load: no use in a selector.
  const stableId = (id) => id && !/\d{3,}|[0-9a-f]{8,}|^:|:$/i.test(id);

  const uniqueIn = (root, selector) => {
    try {
      return root.querySelectorAll(selector).length === 1;
    } catch {
      return false;
    }
  };

  // The shortest selector, climbing from the element, that matches it alone within its document or shadow
  // root; a shadow root's selector is prefixed by its host's and `>>>`.
  const selectorOf = (element) => {
    const root = element.getRootNode();
    const steps = [];
    for (let node = element; node && node.nodeType === Node.ELEMENT_NODE; node = node.parentElement) {
      const tag = CSS.escape(node.localName);
      const anchors = [];
      if (stableId(node.id)) anchors.push(`#${CSS.escape(node.id)}`);
      for (const attribute of ["data-testid", "data-test", "data-qa", "name", "aria-label"]) {
        const value = node.getAttribute(attribute);
        if (value) anchors.push(`${tag}[${attribute}="${CSS.escape(value)}"]`);
      }
      const anchor = anchors.find((candidate) => uniqueIn(root, [candidate, ...steps].join(" > ")));
      if (anchor) {
        steps.unshift(anchor);
        break;
      }
      const siblings = node.parentElement ? [...node.parentElement.children].filter((c) => c.localName === node.localName) : [];
      steps.unshift(siblings.length > 1 ? `${tag}:nth-of-type(${siblings.indexOf(node) + 1})` : tag);
      if (uniqueIn(root, steps.join(" > "))) break;
    }
    const selector = steps.join(" > ");
    return root instanceof ShadowRoot ? `${selectorOf(root.host)} >>> ${selector}` : selector;
  };

  const xpathOf = (element) => {
    const steps = [];
    for (let node = element; node && node.nodeType === Node.ELEMENT_NODE; node = node.parentElement) {
      const name = node.localName;
      let index = 1;
      for (let sibling = node.previousElementSibling; sibling; sibling = sibling.previousElementSibling) {
        if (sibling.localName === name) index += 1;
      }
      steps.unshift(`${name}[${index}]`);
    }
    return `/${steps.join("/")}`;
  };

  const INPUT_ROLES = {
    checkbox: "checkbox", radio: "radio", range: "slider", search: "searchbox", number: "spinbutton",
    button: "button", submit: "button", reset: "button", image: "button",
  };
  const TAG_ROLES = {
    button: "button", textarea: "textbox", img: "img", form: "form", nav: "navigation", main: "main",
    li: "listitem", ul: "list", ol: "list", option: "option", table: "table", dialog: "dialog",
    h1: "heading", h2: "heading", h3: "heading", h4: "heading", h5: "heading", h6: "heading",
  };
  const roleOf = (element) => {
    const explicit = element.getAttribute("role");
    if (explicit) return explicit.split(/\s+/)[0];
    const tag = element.localName;
    if (tag === "a") return element.hasAttribute("href") ? "link" : undefined;
    if (tag === "input") return INPUT_ROLES[element.type] || "textbox";
    if (tag === "select") return element.multiple || element.size > 1 ? "listbox" : "combobox";
    return TAG_ROLES[tag];
  };

  // The accessible name, following the main steps of the W3C algorithm: labelledby, label, labels, alt,
  // the content of buttons and links, then title and placeholder.
  const accessibleNameOf = (element) => {
    const labelledBy = element.getAttribute("aria-labelledby");
    if (labelledBy) {
      const text = labelledBy.split(/\s+/).map((id) => element.ownerDocument.getElementById(id)?.textContent || "").join(" ");
      if (clip(text)) return clip(text);
    }
    const candidates = [element.getAttribute("aria-label")];
    if (element.labels) candidates.push([...element.labels].map((label) => label.textContent).join(" "));
    if (element.localName === "img" || (element.localName === "input" && element.type === "image")) candidates.push(element.alt);
    if (element.localName === "input" && ["submit", "button", "reset"].includes(element.type)) candidates.push(element.value);
    if (["button", "link", "heading", "option", "tab", "menuitem"].includes(roleOf(element))) candidates.push(element.textContent);
    candidates.push(element.getAttribute("title"), element.getAttribute("placeholder"));
    return candidates.map(clip).find(Boolean);
  };

  const isField = (element) => ["input", "textarea", "select"].includes(element.localName) || element.isContentEditable;
  // A field whose value is typed text (arrows and Backspace move or edit within it).
  const NOT_TYPED_INPUTS = ["range", "checkbox", "radio", "button", "submit", "reset", "file", "color", "image"];
  const isTextEntry = (element) =>
    element.isContentEditable ||
    element.localName === "textarea" ||
    (element.localName === "input" && !NOT_TYPED_INPUTS.includes(element.type));

  // Only ever read where the value itself is the point: never as "visible text" of a field.
  const visibleTextOf = (element) => (isField(element) ? undefined : clip(element.innerText ?? element.textContent));

  // Frames are named by the selector of their <iframe> in the parent document. A cross-origin parent cannot
  // be read from here: its <iframe> is then named by the frame's own origin.
  const framePath = () => {
    const path = [];
    try {
      for (let view = window; view !== view.top; view = view.parent) {
        const frame = view.frameElement;
        if (!frame) {
          path.unshift(`iframe[src^="${CSS.escape(view.location.origin)}"]`);
          break;
        }
        path.unshift(selectorOf(frame));
      }
    } catch {
      // A cross-origin ancestor further up: what was found so far is the innermost part of the path.
    }
    return path;
  };

  const describe = (element) => {
    const box = element.getBoundingClientRect();
    return {
      selector: selectorOf(element),
      xpath: xpathOf(element),
      tag: element.localName,
      id: element.id || undefined,
      name: element.getAttribute("name") || undefined,
      input_type: element.localName === "input" ? element.type : undefined,
      role: roleOf(element),
      accessible_name: accessibleNameOf(element),
      text: visibleTextOf(element),
      bbox: { x: box.x, y: box.y, width: box.width, height: box.height },
      frame_path: framePath(),
    };
  };

  // Secrets: password fields, fields whose autocomplete hint names a secret, and fields named like one.
  // Flagging too much costs a redacted value; flagging too little leaks a secret, so the names are broad.
  // The names are the host's own (trace-analysis `secrets::is_secret_name`), put in place of the placeholder
  // below from their one list when trace-capture builds this script; the rule is the same, which a test of
  // trace-capture runs against the host's.
  const SECRET_AUTOCOMPLETE = /\b(current-password|new-password|one-time-code|cc-number|cc-csc|cc-exp(-month|-year)?)\b/;
  const { contained: SECRET_NAME_CONTAINED, whole: SECRET_NAME_WHOLE, compounds: SECRET_NAME_COMPOUNDS } =
    __TRACE_SECRET_NAMES__;
  // Words split at punctuation and at lower-to-upper case changes; a word containing a CONTAINED entry, or
  // equal to a WHOLE one, or the name without "-" and "_" containing a compound, makes the name secret.
  const isSecretName = (name) => {
    const words = [];
    let word = "";
    let previousLower = false;
    for (const c of name) {
      const alphanumeric = /[\p{L}\p{N}]/u.test(c);
      const upper = c !== c.toLowerCase();
      if (!alphanumeric || (upper && previousLower)) {
        words.push(word);
        word = "";
      }
      if (alphanumeric) word += c.toLowerCase();
      previousLower = (c !== c.toUpperCase() && !upper) || /[0-9]/.test(c);
    }
    words.push(word);
    const joined = name.toLowerCase().replace(/[-_]/g, "");
    return (
      SECRET_NAME_COMPOUNDS.some((compound) => joined.includes(compound)) ||
      words.some((w) => SECRET_NAME_CONTAINED.some((part) => w.includes(part)) || SECRET_NAME_WHOLE.includes(w))
    );
  };
  const isCredential = (element) =>
    element.type === "password" ||
    SECRET_AUTOCOMPLETE.test((element.getAttribute("autocomplete") || "").toLowerCase()) ||
    isSecretName(element.getAttribute("name") || "") ||
    isSecretName(element.id || "") ||
    // Its label: a text field labelled "Passphrase" or "API key" takes a secret whatever its name.
    isSecretName(accessibleNameOf(element) || "");

  // ---- Reporting actions -----------------------------------------------------------------------------

  const ACTIONABLE = "a, button, input, select, textarea, label, summary, option, [role], [onclick], [contenteditable]";
  // The element the event happened on, looking into open shadow roots.
  const targetOf = (event) => {
    const target = event.composedPath()[0];
    return target && target.nodeType === Node.ELEMENT_NODE ? target : null;
  };
  const modifiersOf = (event) =>
    [["Alt", event.altKey], ["Control", event.ctrlKey], ["Meta", event.metaKey], ["Shift", event.shiftKey]]
      .filter(([, pressed]) => pressed)
      .map(([name]) => name);

  // ---- Whose action it is ----------------------------------------------------------------------------

  // Trusted events are not all the person's: a page script's `execCommand('insertText')` fires a trusted
  // input, and its `form.requestSubmit()` a trusted submit. `scripted.js`, in the page's world, marks each
  // such call by dispatching `__trace_scripted` just before it: the input, change or submit that arrives
  // before the task ends is the page's own (`page_made`). Text that arrives without any key (autofill, a
  // paste or a drop, an IME commit, `Input.insertText`) is the person's. The mark is heard on the window,
  // in the capture phase, by a listener added before the page's own: no page listener can stop it first.
  let scriptedCall = false;
  on("__trace_scripted", () => {
    scriptedCall = true;
    queueMicrotask(() => (scriptedCall = false));
  }, { capture: true });
  // Under `trace-replay eval` the one acting is an agent driving the browser over DevTools, and every
  // trusted event is its doing.
  const everyTrustedEventIsTheActors = globalThis.__traceEveryTrustedEventIsTheActors === true;
  const byPerson = () => everyTrustedEventIsTheActors || !scriptedCall;

  // Code editors take keys through a hidden textarea they empty after every key (CodeMirror 5, Monaco,
  // Ace) or through a contenteditable of their own (CodeMirror 6): what the person typed is only in the
  // editor's rendering, an element per line. Typing there is an input of the editor, with its text.
  const EDITORS = [
    { root: ".CodeMirror", line: ".CodeMirror-code .CodeMirror-line" }, // CodeMirror 5
    { root: ".cm-editor", line: ".cm-content .cm-line" }, // CodeMirror 6
    { root: ".monaco-editor", line: ".view-lines .view-line" }, // Monaco
    { root: ".ace_editor", line: ".ace_text-layer .ace_line" }, // Ace
  ];
  const editorOf = (element) => {
    for (const { root, line } of EDITORS) {
      const found = element.closest(root);
      if (found) {
        const text = () =>
          [...found.querySelectorAll(line)]
            .map((each) => each.textContent.replace(/\u200b/g, "").replace(/\u00a0/g, " "))
            .join("\n");
        return { root: found, text };
      }
    }
    return null;
  };
  // An editor shows a key only after its own handler ran, which comes after these listeners: its text is
  // read a moment later, or as soon as anything else is reported.
  const EDITOR_SETTLE_MS = 100;
  let pendingEditor = null;
  const flushEditor = () => {
    if (!pendingEditor) return;
    const { editor, pageMade, timer, since } = pendingEditor;
    pendingEditor = null;
    clearTimeout(timer);
    report("input", editor.root, { value: editor.text() }, pageMade, since);
  };

  let pendingScroll = null;
  // `ts` is when the action happened: now, or for typing read later, when its first key came.
  const report = (action, element, extra = {}, pageMade = false, ts = Date.now()) => {
    flushEditor();
    if (action !== "scroll") flushScroll();
    flushMutations();
    emit({
      type: "action",
      ts,
      action: {
        action,
        target: element ? describe(element) : undefined,
        url: location.href,
        credential: Boolean(!pageMade && extra.value !== undefined && element && isField(element) && isCredential(element)),
        page_made: pageMade,
        ...extra,
      },
    });
  };

  // Listeners sit on the window in the capture phase, so that the page cannot stop them by stopping the
  // event; synthetic events (`isTrusted` false) come from the page's scripts, not from the person.
  const listen = (type, handler) =>
    on(type, (event) => {
      if (!event.isTrusted) return;
      try {
        handler(event);
      } catch (error) {
        emit({ type: "error", ts: Date.now(), message: `${type}: ${error}` });
      }
    }, { capture: true, passive: true });

  // When the press a click ends began: a page may act on the press (tabs that switch on `mousedown`), and
  // what it did then is the click's doing.
  // A click that no press began (Enter on a button: `detail` 0) has none; a press belongs to one click only.
  let pressedAt = null;
  listen("pointerdown", (event) => {
    if (event.button === 0) pressedAt = Date.now();
  });

  // ---- Drags -------------------------------------------------------------------------------------------

  // A press moved more than DRAG_MIN_PX with the button held, then released, is a drag (a node dragged from a
  // palette onto a canvas, a wire drawn between two ports), not a click: its release lands on what the page
  // drags along (a copy of the node, the wire being drawn), which the page removes once it is dropped. It is
  // reported with the element pressed (as the press found it), the points of the press and the release, and
  // the element the release came over that was in the page before the drag began. The browser's own drag
  // and drop (`draggable` elements) ends in `drop` and `dragend` instead of a release.
  const DRAG_MIN_PX = 8;
  let press = null;
  let nativeDrag = null;
  // What the page added to itself while a drag went on: never the element dropped onto.
  let addedDuringDrag = null;
  const watchAdded = new MutationObserver((records) => {
    for (const record of records) for (const node of record.addedNodes) addedDuringDrag?.add(node);
  });
  const isAddedDuringDrag = (element) => {
    for (let node = element; node; node = node.parentNode) if (addedDuringDrag?.has(node)) return true;
    return false;
  };
  const dropTargetAt = (x, y, dragged) =>
    document.elementsFromPoint(x, y).find((element) => !isAddedDuringDrag(element) && !dragged.contains(element));
  const endDrag = () => {
    watchAdded.disconnect();
    addedDuringDrag = null;
    press = null;
  };
  // The click the browser fires after a drag's release is no click of the person's.
  let dragJustEnded = false;
  const reportDrag = (start, to, dropTarget, modifiers) => {
    report("drag", null, {
      target: start.target, x: start.x, y: start.y, to_x: to.x, to_y: to.y, moves: start.moves, modifiers,
      drop_target: dropTarget ? describe(dropTarget) : undefined,
    }, false, start.ts);
    dragJustEnded = true;
    setTimeout(() => (dragJustEnded = false));
  };
  listen("pointerdown", (event) => {
    // A scrollbar dragged is a scroll, reported as one.
    if (event.button !== 0 || !event.isPrimary || onScrollbar(event)) return;
    const element = targetOf(event);
    press = element && { element, target: describe(element), x: event.clientX, y: event.clientY, ts: Date.now(), moves: 0, dragging: false };
  });
  listen("pointermove", (event) => {
    if (!press || !(event.buttons & 1)) return;
    press.moves += 1;
    if (!press.dragging && Math.hypot(event.clientX - press.x, event.clientY - press.y) >= DRAG_MIN_PX) {
      press.dragging = true;
      addedDuringDrag = new Set();
      watchAdded.observe(document, { subtree: true, childList: true });
    }
  });
  listen("pointercancel", () => endDrag());
  listen("dragstart", (event) => {
    const element = targetOf(event);
    if (!element) return;
    const from = press && press.element.contains(element) ? press : null;
    nativeDrag = from ? { ...from } : { element, target: describe(element), x: event.clientX, y: event.clientY, ts: Date.now(), moves: 0 };
    endDrag();
  });
  listen("dragover", () => nativeDrag && (nativeDrag.moves += 1));
  listen("drop", (event) => {
    if (nativeDrag) nativeDrag.drop = { x: event.clientX, y: event.clientY, element: targetOf(event) };
  });
  listen("dragend", (event) => {
    if (!nativeDrag) return;
    const { drop } = nativeDrag;
    reportDrag(nativeDrag, drop || { x: event.clientX, y: event.clientY }, drop?.element, modifiersOf(event));
    nativeDrag = null;
  });
  const pointer = (event) => ({
    x: event.clientX, y: event.clientY, modifiers: modifiersOf(event),
    pressed_ts: pressedAt !== null && (event.type === "pointerup" || event.detail > 0) ? pressedAt : undefined,
  });
  // A click on a <label> makes the browser click its control too: that second click is not the person's.
  // Likewise, Enter in a form field makes the browser click the form's submit button: the key press says it already.
  let forwardedTo = null;
  let lastEnter = 0;
  listen("click", (event) => {
    if (dragJustEnded) return;
    const target = targetOf(event);
    // The release took its item out of the page: the browser fires the click at what is left (an ancestor).
    const release = released;
    released = null;
    if (release && !release.element.isConnected && !(target && release.element.contains(target))) {
      report("click", null, { target: release.target, ...release.extra }, false, release.ts);
      pressedAt = null;
      return;
    }
    const element = target && (target.closest(ACTIONABLE) || target);
    if (element && element === forwardedTo) return;
    if (event.detail === 0 && performance.now() - lastEnter < 100) return;
    forwardedTo = element?.localName === "label" ? element.control : null;
    if (forwardedTo) setTimeout(() => (forwardedTo = null));
    report("click", element, pointer(event));
    pressedAt = null;
  });
  // A menu that acts on the button's release (and closes, taking its item out of the page) leaves the browser
  // no element to fire the click at: the release is the click then. Its target is described as the
  // release finds it, still in the page; once the release's handlers have run, an item gone from the page
  // was clicked, whether the browser fired no click or fired it at what was left.
  let released = null;
  // (`pointerup`, not `mouseup`: a page that cancels the press's `pointerdown` gets no mouse events for it.)
  listen("pointerup", (event) => {
    if (event.button !== 0) return;
    if (press?.dragging) {
      const dropTarget = dropTargetAt(event.clientX, event.clientY, press.element);
      reportDrag(press, { x: event.clientX, y: event.clientY }, dropTarget, modifiersOf(event));
      endDrag();
      return;
    }
    press = null;
    const target = targetOf(event);
    const element = target && (target.closest(ACTIONABLE) || target);
    if (!element) return;
    released = { element, target: describe(element), extra: pointer(event), ts: Date.now() };
    setTimeout(() => {
      const release = released;
      released = null;
      if (release?.element.isConnected === false) report("click", null, { target: release.target, ...release.extra }, false, release.ts);
    });
  });
  listen("dblclick", (event) => {
    const target = targetOf(event);
    report("double_click", target && (target.closest(ACTIONABLE) || target), pointer(event));
  });

  const valueOf = (field) => (field.isContentEditable ? field.innerText : field.value);
  // Every change of a text field is reported with the whole value; Rust keeps the last of a run.
  listen("input", (event) => {
    const field = targetOf(event);
    if (!field || !isField(field) || ["checkbox", "radio", "file"].includes(field.type) || field.localName === "select") return;
    const editor = editorOf(field);
    if (editor) {
      if (pendingEditor && pendingEditor.editor.root !== editor.root) flushEditor();
      clearTimeout(pendingEditor?.timer);
      const since = pendingEditor?.since ?? Date.now();
      const timer = setTimeout(flushEditor, EDITOR_SETTLE_MS);
      pendingEditor = { editor, pageMade: !byPerson(), timer, since };
      return;
    }
    report("input", field, { value: valueOf(field) }, !byPerson());
  });
  listen("change", (event) => {
    const field = targetOf(event);
    if (!field) return;
    if (field.localName === "select") {
      const chosen = [...field.selectedOptions].map((option) => clip(option.label || option.text) || option.value);
      report("change", field, { value: chosen.join(", ") }, !byPerson());
    } else if (field.type === "checkbox" || field.type === "radio") {
      report("change", field, { value: String(field.checked) }, !byPerson());
    } else if (field.type === "file") {
      const files = [...field.files].map((file) => file.name).join(", ");
      report("change", field, { value: files }, !byPerson());
    }
  });
  listen("submit", (event) => {
    const form = targetOf(event);
    report("submit", form, {}, !byPerson());
  });

  const MEANINGFUL_KEYS = new Set(["Enter", "Tab", "Escape", "Backspace", "Delete", "ArrowUp", "ArrowDown", "ArrowLeft", "ArrowRight", "PageUp", "PageDown", "Home", "End"]);
  const MODIFIER_KEYS = new Set(["Alt", "Control", "Meta", "Shift", "AltGraph", "CapsLock"]);
  listen("keydown", (event) => {
    if (event.key === "Enter") lastEnter = performance.now();
    const shortcut = (event.ctrlKey || event.metaKey || event.altKey) && !MODIFIER_KEYS.has(event.key);
    // Backspace and the like only matter outside a field one types into, where the typed value already says
    // it all. On a slider or a spin button the arrows are the change itself (and a page that handles them
    // may fire no change event at all), so they are recorded there.
    const target = targetOf(event);
    // In a code editor every key but a shortcut is text (Enter a new line, Tab an indent), unless the
    // editor's text stays as it was: then the page took the key as a command (Shift+Enter runs a notebook's
    // cell, Escape leaves it), which is the person's action.
    const editor = target && !shortcut && editorOf(target);
    if (editor) {
      if (!["Enter", "Tab", "Escape"].includes(event.key)) return;
      const before = editor.text();
      const ts = Date.now();
      const extra = { target: describe(target), key: event.key, modifiers: modifiersOf(event) };
      setTimeout(() => {
        if (editor.text() === before) report("key_press", null, extra, false, ts);
      });
      return;
    }
    const editing = ["Backspace", "Delete", "ArrowLeft", "ArrowRight", "Home", "End"].includes(event.key) && target && isTextEntry(target);
    if (!shortcut && (!MEANINGFUL_KEYS.has(event.key) || editing)) return;
    const element = target && target !== document.body && target !== document.documentElement ? target : null;
    report("key_press", element, { key: event.key, modifiers: modifiersOf(event) });
  });

  // Scrolling is one action per scroll container and burst, reported once it has been still for a moment.
  // A scroll is the person's only shortly after input that scrolls: the wheel, a touch moving, a key that
  // scrolls outside a text field, a press on a scrollbar. A page scrolling itself after a click (a
  // focused element brought into view) or as the person types (an editor keeping its cursor in view) is
  // the page's own, not the person's.
  const SCROLL_SETTLE_MS = 300;
  const USER_SCROLL_WINDOW_MS = 1000;
  const SCROLLING_KEYS = new Set(["PageUp", "PageDown", "Home", "End", "ArrowUp", "ArrowDown", "ArrowLeft", "ArrowRight", " "]);
  const onScrollbar = (event) => {
    const target = targetOf(event);
    if (!target) return false;
    if (target === document.documentElement || target === document.body) {
      return event.clientX >= document.documentElement.clientWidth || event.clientY >= document.documentElement.clientHeight;
    }
    // Only an HTML element whose content overflows it has scrollbars. An SVG shape's client box is empty
    // (clientWidth 0): every press on it would be taken for one on a scrollbar.
    const overflows = target.scrollWidth > target.clientWidth || target.scrollHeight > target.clientHeight;
    if (!(target instanceof HTMLElement) || !overflows) return false;
    return event.offsetX >= target.clientWidth || event.offsetY >= target.clientHeight;
  };
  const scrolls = {
    wheel: () => true,
    touchmove: () => true,
    keydown: (event) => SCROLLING_KEYS.has(event.key) && !(targetOf(event) && isField(targetOf(event))),
    pointerdown: onScrollbar,
  };
  // Only the person's own input counts: a synthetic wheel (`dispatchEvent`) is not trusted.
  let lastScrollingInput = 0;
  for (const [type, scrolling] of Object.entries(scrolls)) {
    on(type, (event) => {
      if (event.isTrusted && scrolling(event)) lastScrollingInput = Date.now();
    }, { capture: true, passive: true });
  }
  const positionOf = (container) =>
    container === document ? [window.scrollX, window.scrollY] : [container.scrollLeft, container.scrollTop];
  const settledPositions = new WeakMap(); // where each container rested after its last burst
  const flushScroll = () => {
    if (!pendingScroll) return;
    const { container, start, timer } = pendingScroll;
    pendingScroll = null;
    clearTimeout(timer);
    const [x, y] = positionOf(container);
    settledPositions.set(container, [x, y]);
    if (x === start[0] && y === start[1]) return;
    report("scroll", container === document ? null : container, { delta_x: x - start[0], delta_y: y - start[1] });
  };
  listen("scroll", (event) => {
    const container = event.target === document.documentElement ? document : event.target;
    if (container !== document && container.nodeType !== Node.ELEMENT_NODE) return;
    if (Date.now() - lastScrollingInput > USER_SCROLL_WINDOW_MS) {
      settledPositions.set(container, positionOf(container));
      return;
    }
    if (pendingScroll && pendingScroll.container !== container) flushScroll();
    pendingScroll ??= { container, start: settledPositions.get(container) || [0, 0], timer: 0 };
    clearTimeout(pendingScroll.timer);
    pendingScroll.timer = setTimeout(flushScroll, SCROLL_SETTLE_MS);
  });
  on("pagehide", () => { flushEditor(); flushScroll(); }, { capture: true });

  // ---- Counting mutations ----------------------------------------------------------------------------

  // Counts only, never the nodes: a page that rewrites itself thousands of times a second (a mutation
  // storm) costs one counter increment per record, and past the limit the observer lets go until the next
  // report, which says the count was cut short.
  const MUTATION_LIMIT = 10000;
  const MUTATION_REPORT_MS = 1000;
  let counts = { added: 0, removed: 0, attributes: 0, text: 0, truncated: false };
  let seen = 0;
  const observer = new MutationObserver((records) => {
    for (const record of records) {
      if (record.type === "childList") {
        counts.added += record.addedNodes.length;
        counts.removed += record.removedNodes.length;
      } else if (record.type === "attributes") {
        counts.attributes += 1;
      } else {
        counts.text += 1;
      }
    }
    seen += records.length;
    if (seen > MUTATION_LIMIT) {
      counts.truncated = true;
      observer.disconnect();
    }
  });
  const observe = () => observer.observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
  const flushMutations = () => {
    const changed = counts.added + counts.removed + counts.attributes + counts.text;
    if (changed > 0) emit({ type: "mutations", ts: Date.now(), summary: counts });
    if (counts.truncated) observe();
    counts = { added: 0, removed: 0, attributes: 0, text: 0, truncated: false };
    seen = 0;
  };
  observe();
  setInterval(flushMutations, MUTATION_REPORT_MS);

  // ---- A document the page rewrites ------------------------------------------------------------------

  // `document.open()` (a page filling an iframe of its own with `open` and `write`, as editors do) replaces
  // the document's element and erases every listener of the window: where a sentinel no longer hears, the
  // listeners are added again. Nothing else is lost: this script's state and observers stay.
  let heard = false;
  on("__trace_listening", () => (heard = true), { capture: true });
  new MutationObserver(() => {
    heard = false;
    window.dispatchEvent(new Event("__trace_listening"));
    if (!heard) for (const [type, handler, options] of registrations) window.addEventListener(type, handler, options);
  }).observe(document, { childList: true });
})();
