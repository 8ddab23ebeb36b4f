// A dedicated worker of the strict page: it asks the server on its own, as workers of real sites do, so a
// recorder must follow the page into its workers to see that request.
fetch('/api/ping?from=worker')
  .then((response) => response.json())
  .then((reply) => postMessage(reply.ok ? 'pong' : 'no answer'));
