// "Sealed note" (`/sealed`): gzips the sign-in itself (`CompressionStream`) and posts it as
// `application/octet-stream`, with no `Content-Encoding`, as bandwidth-saving pages do. A page's own
// script, as a real one would be; Rust has no place in it.
document.getElementById("sealed-send").addEventListener("click", async () => {
  const status = document.getElementById("sealed-status");
  const signIn = JSON.stringify({
    user: document.getElementById("sealed-user").value,
    password: document.getElementById("sealed-password").value,
    vault: { passphrase: document.getElementById("sealed-passphrase").value },
  });
  const gzipped = await new Response(new Blob([signIn]).stream().pipeThrough(new CompressionStream("gzip")))
    .arrayBuffer();
  const answer = await fetch("/sealed/send", {
    method: "POST",
    headers: { "Content-Type": "application/octet-stream" },
    body: gzipped,
  });
  status.textContent = answer.ok ? `Sealed for ${(await answer.json()).sealed_for}` : "Refused";
});
