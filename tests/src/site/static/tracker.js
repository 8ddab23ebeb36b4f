// Analytics stand-in: reports every page view to /collect. Nothing on the site depends on it; it is the
// noise that a recording captures and that post-processing has to learn to ignore.
navigator.sendBeacon('/collect?e=pageview&p=' + location.pathname);
