// "Ask an expert" (`/ask`): the page makes its own session id, posts the question with it, and listens
// for the answer on an event stream keyed by that id, ignoring events of any other session.
const status = document.getElementById("status");
const answer = document.getElementById("answer");
const question = document.getElementById("question");
document.getElementById("ask").addEventListener("click", async () => {
  const session = Math.random().toString(36).slice(2) + Math.random().toString(36).slice(2);
  status.textContent = "Sending…";
  const joined = await fetch("/ask/join", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ session, question: question.value }),
  });
  if (!joined.ok) {
    status.textContent = "The question could not be sent";
    return;
  }
  const events = new EventSource(`/ask/stream?session=${session}`);
  let done = false;
  events.addEventListener("message", (event) => {
    const data = JSON.parse(event.data);
    if (data.session !== session) return;
    if (data.kind === "progress") status.textContent = data.text;
    if (data.kind === "answer") answer.textContent = data.text;
    if (data.kind === "done") {
      done = true;
      status.textContent = "Answered";
      events.close();
    }
  });
  events.addEventListener("error", () => {
    if (!done) status.textContent = "Connection to the server was lost";
    events.close();
  });
});
