// The support chat's script (`/chat`): the conversation goes over a WebSocket; each line the server sends
// is shown, and the person's messages are sent as they press Send.
const messages = document.getElementById("messages");
const input = document.getElementById("chat-input");
const show = (who, text) => {
  const line = document.createElement("li");
  line.className = who;
  line.textContent = text;
  messages.append(line);
};
const socket = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/chat/socket`);
socket.addEventListener("message", (event) => show("support", event.data));
socket.addEventListener("close", () => show("status", "Connection to the server was lost"));
document.getElementById("chat-send").addEventListener("click", () => {
  if (!input.value) return;
  show("me", input.value);
  socket.send(input.value);
  input.value = "";
});
