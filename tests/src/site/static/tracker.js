// Analytics stand-in: reports every page view to /collect, and, as the page goes away, that the person left
// (a beacon and a keep-alive fetch sent during unload, which a recorder must not lose). Nothing on the site
// depends on it; it is the noise that a recording captures and that post-processing has to learn to ignore.
navigator.sendBeacon('/collect?e=pageview&p=' + location.pathname);
addEventListener('pagehide', () => {
  navigator.sendBeacon('/collect?e=leave&p=' + location.pathname);
  fetch('/collect?e=leave-keepalive&p=' + location.pathname, { method: 'POST', keepalive: true });
});
