// Time and randomness, shown as they are: replay has to pin both for this page to come out the same twice.
document.getElementById('now').textContent = String(Date.now());
document.getElementById('random').textContent = String(Math.random());
