// The only script the strict page may run: its CSP allows scripts from this origin, nothing inline.
document.getElementById('strict-button').addEventListener('click', () => {
  document.getElementById('strict-output').textContent = document.getElementById('strict-input').value;
});
