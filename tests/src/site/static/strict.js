// The only script the strict page may run: its CSP allows scripts from this origin, nothing inline.
document.getElementById('strict-button').addEventListener('click', () => {
  document.getElementById('strict-output').textContent = document.getElementById('strict-input').value;
});

const worker = new Worker('/static/strict-worker.js');
worker.addEventListener('message', (event) => {
  document.getElementById('strict-worker').textContent = event.data;
});
