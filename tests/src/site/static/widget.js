// The embedded widget: a click shows at once, then a request from inside the frame answers.
document.getElementById('widget-button').addEventListener('click', async () => {
  document.getElementById('widget-output').textContent = 'clicked';
  const response = await fetch('/api/ping');
  const reply = await response.json();
  document.getElementById('widget-ping').textContent = reply.ok ? 'pong' : 'no answer';
});
