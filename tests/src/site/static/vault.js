// "Partner vault" (`/vault`): sends the sign-in the way script-driven login pages do, so that the
// redaction tests meet the encodings such pages use: a client secret in JSON declared a form, as jQuery's
// `$.ajax` sends a JSON string; `user:passphrase` in base64 inside JSON sent as `text/plain`; and the
// passphrase, an API key and the base64 again in a URL built with `encodeURIComponent`.
const form = document.getElementById("vault-form");
const status = document.getElementById("vault-status");

// What `$.ajax({ type: "POST", url, data: JSON.stringify(...) })` sends: no content type given, so jQuery's
// default, a form's, whatever the body is.
const postAsJquery = (url, body) =>
  new Promise((resolve, reject) => {
    const request = new XMLHttpRequest();
    request.open("POST", url);
    request.setRequestHeader("Content-Type", "application/x-www-form-urlencoded; charset=UTF-8");
    request.setRequestHeader("X-Requested-With", "XMLHttpRequest");
    request.onload = () => resolve(request);
    request.onerror = () => reject(new Error(`${url} failed`));
    request.send(body);
  });

document.getElementById("vault-open").addEventListener("click", async () => {
  const user = document.getElementById("vault-user").value;
  const passphrase = document.getElementById("vault-passphrase").value;
  status.textContent = "Opening…";
  const partner = await postAsJquery(
    "/vault/connect",
    JSON.stringify({ client_secret: form.dataset.clientSecret, form_key: form.elements.form_key.value }),
  );
  if (partner.status !== 200) {
    status.textContent = `Refused: ${JSON.parse(partner.responseText).error}`;
    return;
  }
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
  const basic = encodeURIComponent(btoa(`${user}:${passphrase}`));
  const checked = await fetch(`/vault/check?key=${key}&p=${encodeURIComponent(passphrase)}&basic=${basic}`);
  const { status: state } = await checked.json();
  status.textContent = state === "open" ? `Vault open for ${name}` : "The vault stays locked";
});
