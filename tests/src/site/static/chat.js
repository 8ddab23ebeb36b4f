// The support chat's script (`/chat`, and `/chat/worker` where a worker keeps the connection:
// `chat-worker.js`): the conversation goes over a WebSocket as JSON. The page names its conversation with an
// id of its own and shows the server's lines that carry no conversation (the greeting) or name this one; the
// person's messages are sent as they press Send.
const messages = document.getElementById("messages");
const input = document.getElementById("chat-input");
const show = (who, text) => {
  const line = document.createElement("li");
  line.className = who;
  line.textContent = text;
  messages.append(line);
};
let send;
if (location.pathname.endsWith("/worker")) {
  const worker = new Worker("/static/chat-worker.js");
  worker.addEventListener("message", (event) => show("support", event.data));
  send = (text) => worker.postMessage(text);
} else {
  const conversation = `c${Math.floor(Math.random() * 1e12)}`;
  const socket = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/chat/socket`);
  socket.addEventListener("message", (event) => {
    const line = JSON.parse(event.data);
    if (line.conversation === undefined || line.conversation === conversation) show("support", line.text);
  });
  socket.addEventListener("close", () => show("status", "Connection to the server was lost"));
  send = (text) => socket.send(JSON.stringify({ conversation, text }));
}
document.getElementById("chat-send").addEventListener("click", () => {
  if (!input.value) return;
  show("me", input.value);
  send(input.value);
  input.value = "";
});
