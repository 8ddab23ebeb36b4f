// The support chat's connection kept in a dedicated worker (`/chat/worker`), as apps that keep their
// connection off the main thread do: the worker opens the WebSocket, names the conversation with an id of its
// own, forwards the page's messages and posts back the server's lines that carry no conversation (the
// greeting) or name this one.
const conversation = `c${Math.floor(Math.random() * 1e12)}`;
const socket = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/chat/socket`);
socket.addEventListener("message", (event) => {
  const line = JSON.parse(event.data);
  if (line.conversation === undefined || line.conversation === conversation) postMessage(line.text);
});
socket.addEventListener("close", () => postMessage("Connection to the server was lost"));
addEventListener("message", (event) => socket.send(JSON.stringify({ conversation, text: event.data })));
