// The forging page's script (`/forge`), for the recording tests: once the recorder is surely in place, it
// does by itself what a person would do with the keyboard and mouse: types a word into the password field
// (`execCommand('insertText')`, which fires a trusted input event), submits the form (`requestSubmit()`,
// a trusted submit), and scrolls the page after dispatching a synthetic wheel. None of it is the person's.
// Then, as the person types in the search field, it scrolls the page along (the person's typing, the
// page's scroll); as they type a title, it fills the note beside it; and its slider moves with the arrow
// keys, handled here, with no change event.
const search = document.getElementById("forge-search");
search.addEventListener("input", () => window.scrollBy(0, 40));
// While the person types a title, the page writes into the note beside it, in the same form, a moment
// later: a trusted input a moment after the person's keys, and still the page's.
const title = document.getElementById("forge-title");
let noted = false;
title.addEventListener("input", () => {
  if (noted) return;
  noted = true;
  setTimeout(() => {
    document.getElementById("forge-note").focus();
    document.execCommand("insertText", false, "forged note");
    title.focus();
  }, 300);
});
const volume = document.getElementById("volume");
volume.addEventListener("keydown", (event) => {
  const step = { ArrowRight: 1, ArrowUp: 1, ArrowLeft: -1, ArrowDown: -1 }[event.key];
  if (!step) return;
  event.preventDefault();
  const value = Math.min(10, Math.max(0, Number(volume.getAttribute("aria-valuenow")) + step));
  volume.setAttribute("aria-valuenow", String(value));
  volume.textContent = String(value);
});
setTimeout(() => {
  const form = document.getElementById("forge-form");
  form.addEventListener("submit", (event) => event.preventDefault());
  document.getElementById("forge-password").focus();
  document.execCommand("insertText", false, "account");
  form.requestSubmit();
  window.dispatchEvent(new WheelEvent("wheel", { deltaY: 400, bubbles: true }));
  window.scrollBy(0, 400);
  setTimeout(() => (document.body.dataset.forged = "done"), 800);
}, 1500);
