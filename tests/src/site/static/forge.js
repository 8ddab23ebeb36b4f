// The forging page's script (`/forge`), for the recording tests: once the recorder is surely in place, it
// does by itself what a person would do with the keyboard and mouse: types a word into the password field
// (`execCommand('insertText')`, which fires a trusted input event), submits the form (`requestSubmit()`,
// a trusted submit), and scrolls the page after dispatching a synthetic wheel. None of it is the person's.
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
