// fedqueue admin console: opt-in live view. When "Live" is ticked, the page's <main> is
// fetched again every 3 seconds and swapped in place, so states change without a reload.
// Same-origin script, no inline code: it runs under the console's Content-Security-Policy.
"use strict";
(function () {
  var KEY = "fedqueue-live";
  var PERIOD_MS = 3000;
  var timer = null;

  function refresh() {
    var main = document.getElementById("main");
    if (main && main.contains(document.activeElement) && document.activeElement.matches("input, select")) {
      return;  // never swap a form out from under someone typing in it
    }
    fetch(window.location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.text();
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("main");
        var current = document.getElementById("main");
        if (fresh && current) {
          var flash = fresh.querySelector("#flash");
          if (flash) { flash.remove(); }  // a flash belongs to the page load that showed it
          current.innerHTML = fresh.innerHTML;
          document.documentElement.dataset.liveRefreshed = String(Date.now());
        }
      })
      .catch(function () { stop(); setToggle(false); });
  }

  function start() { if (timer === null) { timer = window.setInterval(refresh, PERIOD_MS); } }
  function stop() { if (timer !== null) { window.clearInterval(timer); timer = null; } }
  function setToggle(on) {
    var toggle = document.getElementById("live-toggle");
    if (toggle) { toggle.checked = on; }
    try { window.localStorage.setItem(KEY, on ? "on" : "off"); } catch (e) { /* private mode */ }
  }

  document.addEventListener("DOMContentLoaded", function () {
    var toggle = document.getElementById("live-toggle");
    if (!toggle) { return; }
    var on = false;
    try { on = window.localStorage.getItem(KEY) === "on"; } catch (e) { /* private mode */ }
    toggle.checked = on;
    if (on) { start(); }
    toggle.addEventListener("change", function () {
      setToggle(toggle.checked);
      if (toggle.checked) { refresh(); start(); } else { stop(); }
    });
  });
})();
