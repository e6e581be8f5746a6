// mekara ui: the page reads without this script; with it, the page follows the run live
// (server-sent events say when to fetch it again) and the copy buttons work.
"use strict";
(function () {
  function bindCopy() {
    document.querySelectorAll("button.copy").forEach(function (button) {
      if (!navigator.clipboard) return;
      button.hidden = false;
      button.onclick = function () {
        navigator.clipboard.writeText(button.dataset.copy).then(function () {
          button.textContent = "copied";
        });
      };
    });
  }
  // Which folds are open, by their place on the page, kept across a refresh.
  function openStates() {
    return Array.prototype.map.call(document.querySelectorAll("#content details"), function (d) {
      return d.open;
    });
  }
  // A person typing in a form (a filter, an answer) keeps what they typed: the page is
  // fetched again when they leave the form.
  var pending = false;
  function typing() {
    var active = document.activeElement;
    return active && active.closest && active.closest("#content form") !== null;
  }
  document.addEventListener("focusout", function () {
    setTimeout(function () {
      if (pending && !typing()) refresh();
    }, 0);
  });
  function refresh() {
    if (typing()) { pending = true; return; }
    pending = false;
    fetch(location.href, { headers: { Accept: "text/html" } })
      .then(function (response) { return response.text(); })
      .then(function (text) {
        // They may have started typing while the page was on its way: keep what they typed.
        if (typing()) { pending = true; return; }
        var next = new DOMParser().parseFromString(text, "text/html").getElementById("content");
        var content = document.getElementById("content");
        if (!next || !content) return;
        var states = openStates();
        content.replaceChildren.apply(content, Array.prototype.slice.call(next.childNodes));
        document.querySelectorAll("#content details").forEach(function (d, i) {
          if (i < states.length) d.open = states[i];
        });
        bindCopy();
        document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
      });
  }
  bindCopy();
  var url = document.body.dataset.events;
  if (!url || !window.EventSource) return;
  var live = document.getElementById("live");
  var events = new EventSource(url);
  events.onopen = function () {
    live.hidden = false;
    document.body.dataset.connected = "yes";
  };
  events.onerror = function () { live.hidden = true; };
  // The first event says how things are now, which may be newer than the page.
  events.addEventListener("change", refresh);
})();
