// "Partner vault" (`/vault`): sends the sign-in the way script-driven login pages do, so that the
// redaction tests meet the encodings such pages use: `user:passphrase` in base64 inside JSON sent as
// `text/plain`, and the passphrase and an API key in a URL built with `encodeURIComponent`.
const form = document.getElementById("vault-form");
const status = document.getElementById("vault-status");
document.getElementById("vault-open").addEventListener("click", async () => {
  const user = document.getElementById("vault-user").value;
  const passphrase = document.getElementById("vault-passphrase").value;
  status.textContent = "Opening…";
  const connected = await fetch("/vault/connect", {
    method: "POST",
    headers: { "Content-Type": "text/plain;charset=UTF-8" },
    body: JSON.stringify({
      auth: btoa(`${user}:${passphrase}`),
      form_key: form.elements.form_key.value,
      api_token: form.dataset.apiToken,
    }),
  });
  if (!connected.ok) {
    status.textContent = `Refused: ${(await connected.json()).error}`;
    return;
  }
  const { user: name } = await connected.json();
  const key = encodeURIComponent(form.dataset.apiKey);
  const checked = await fetch(`/vault/check?key=${key}&p=${encodeURIComponent(passphrase)}`);
  const { status: state } = await checked.json();
  status.textContent = state === "open" ? `Vault open for ${name}` : "The vault stays locked";
});
