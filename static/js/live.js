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

// A success notice ("requested; an approver decides next") describes the moment of the action:
// once the live state it talks about changes, it is stale, so it goes.
// Not before the user had a few seconds to read it, though.
const NOTICE_MIN_MS = 5000;
const pageShownAt = Date.now();
function dropNotices() {
  const wait = Math.max(0, NOTICE_MIN_MS - (Date.now() - pageShownAt));
  setTimeout(function () {
    document.querySelectorAll(".messages li.success").forEach(function (notice) { notice.remove(); });
  }, wait);
}
document.addEventListener("htmx:oobAfterSwap", function (event) {
  const swapped = event.detail.target;
  if (swapped && swapped.id && swapped.id.endsWith("-status")) { dropNotices(); }
});
// The dashboard's lists are answered only when something in them changed.
document.addEventListener("htmx:afterSwap", function (event) {
  if (event.detail.target && event.detail.target.id === "dashboard-live") { dropNotices(); }
});

// A row the user is acting on stays when the live part around it is redrawn for another
// change, as long as the row's state is the same: one whose decision is on its way (htmx
// would swap the answer into the row the redraw had detached, and it would be lost) and one
// whose answer was an error (a rejection without a reason, say), which the redraw knows
// nothing of. (Registered before the typed-text handlers below: they then find its inputs.)
const erred = {};
document.addEventListener("htmx:oobBeforeSwap", function (event) {
  const target = event.detail.target;
  if (!target || !target.id) { return; }
  erred[target.id] = Array.from(target.querySelectorAll("tr[id][data-state]")).filter(function (row) {
    return row.querySelector(".errorlist, .htmx-request");
  });
});
document.addEventListener("htmx:oobAfterSwap", function (event) {
  const id = event.detail.target && event.detail.target.id;
  const rows = erred[id] || [];
  delete erred[id];
  rows.forEach(function (kept) {
    const redrawn = document.getElementById(kept.id);
    if (redrawn && redrawn !== kept && redrawn.dataset.state === kept.dataset.state) {
      redrawn.replaceWith(kept);
    }
  });
});

// A live part redrawn while the user types in it (a reason for rejecting, say) keeps what was
// typed and where the focus was: inputs are matched by the id of their row and their name.
const typed = {};
function inputKey(input) {
  const owner = input.closest("[id]");
  return owner ? owner.id + " " + input.name : null;
}
document.addEventListener("htmx:oobBeforeSwap", function (event) {
  const target = event.detail.target;
  if (!target || !target.id) { return; }
  typed[target.id] = [];
  target.querySelectorAll("input[type=text][name], textarea[name]").forEach(function (input) {
    if (input.value !== input.defaultValue || input === document.activeElement) {
      typed[target.id].push({key: inputKey(input), value: input.value, focused: input === document.activeElement});
    }
  });
});
document.addEventListener("htmx:oobAfterSwap", function (event) {
  const kept = typed[event.detail.target && event.detail.target.id];
  const part = kept && document.getElementById(event.detail.target.id);
  if (!part) { return; }
  part.querySelectorAll("input[type=text][name], textarea[name]").forEach(function (input) {
    const entry = kept.find(function (item) { return item.key === inputKey(input); });
    if (entry) {
      input.value = entry.value;
      if (entry.focused) { input.focus(); }
    }
  });
  delete typed[event.detail.target.id];
});

// Copy buttons: the clipboard when the browser allows it (HTTPS or localhost), else the text
// is selected so Ctrl+C copies it. Without JavaScript the buttons stay hidden.
function copyText(button) {
  const source = document.getElementById(button.dataset.copy);
  const status = button.nextElementSibling;
  const text = source.innerText.replace(/\n$/, "");
  const selectIt = function () {
    window.getSelection().selectAllChildren(source);
    status.textContent = "Selected: press Ctrl+C (⌘C) to copy.";
  };
  if (!navigator.clipboard || !window.isSecureContext) { selectIt(); return; }
  navigator.clipboard.writeText(text).then(function () {
    status.textContent = "Copied.";
  }, selectIt);
}
document.addEventListener("click", function (event) {
  const button = event.target.closest("button[data-copy]");
  if (button) { copyText(button); }
});
function showCopyButtons(root) {
  root.querySelectorAll("button[data-copy]").forEach(function (button) { button.hidden = false; });
}

// Elapsed time of what is still going, ticking each second (the server renders the value
// at page load; the live region replaces the element when the state changes).
function tickElapsed() {
  document.querySelectorAll("[data-elapsed-since]").forEach(function (clock) {
    const seconds = Math.max(0, Math.floor((Date.now() - Date.parse(clock.dataset.elapsedSince)) / 1000));
    const h = Math.floor(seconds / 3600), m = Math.floor((seconds % 3600) / 60), s = seconds % 60;
    const pad = function (n) { return String(n).padStart(2, "0"); };
    clock.textContent = h ? h + " h " + pad(m) + " min" : m ? m + " min " + pad(s) + " s" : s + " s";
  });
}
setInterval(tickElapsed, 1000);
document.addEventListener("htmx:load", function (event) { showCopyButtons(event.detail.elt); });
document.addEventListener("DOMContentLoaded", function () { showCopyButtons(document); });
