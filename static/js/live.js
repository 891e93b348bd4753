// A live page's watcher waits for the next change. When its request fails (network, server
// restart, an error page), ask again a little later instead of leaving the page frozen.
function retryWatcher(event) {
  const watcher = event.detail.elt;
  if (watcher && watcher.id && watcher.id.endsWith("-watch") && !event.detail.successful) {
    watcher.dispatchEvent(new Event("live-retry"));
  }
}
document.addEventListener("htmx:afterRequest", retryWatcher);
document.addEventListener("htmx:sendError", retryWatcher);
