// oncehook's dashboard enhancements. Every page works without this file; it adds
// select-all and shift-click for the bulk form, a count of the rows selected, and
// keeps htmx's polling from replacing a table while rows are selected.
(function () {
  "use strict";
  var last = null; // the row checkbox clicked last, for shift-click ranges

  function picks() {
    return Array.prototype.slice.call(document.querySelectorAll('input[type=checkbox][name=id][form=bulk]'));
  }

  function update() {
    var all = document.getElementById("pick-all");
    var boxes = picks();
    var n = boxes.filter(function (b) { return b.checked; }).length;
    if (all) {
      all.hidden = false;
      all.checked = boxes.length > 0 && n === boxes.length;
      all.indeterminate = n > 0 && n < boxes.length;
    }
    var count = document.getElementById("bulk-count");
    if (count) {
      count.textContent = n === 0 ? "Tick rows below, or act on all that match the filter."
        : n + (n === 1 ? " action selected." : " actions selected.");
    }
  }

  document.addEventListener("click", function (e) {
    var t = e.target;
    if (!(t instanceof HTMLInputElement) || t.type !== "checkbox") return;
    if (t.id === "pick-all") {
      picks().forEach(function (b) { b.checked = t.checked; });
    } else if (t.name === "id" && t.getAttribute("form") === "bulk") { // not t.form.id: the rows named "id" shadow it
      if (e.shiftKey && last && last !== t) {
        var boxes = picks(), a = boxes.indexOf(last), b = boxes.indexOf(t);
        if (a >= 0 && b >= 0) {
          boxes.slice(Math.min(a, b), Math.max(a, b) + 1).forEach(function (x) { x.checked = t.checked; });
        }
      }
      last = t;
    } else {
      return;
    }
    update();
    liveStatus();
  });

  // Live parts ([data-live]) poll their own URL. A poll waits while updates are
  // paused, while rows are ticked (replacing them would move them under the
  // person's pointer) and while the person is typing into a form inside; the
  // status line says which, and the polls go on by themselves once it is over.
  var paused = false, updated = Date.now(), held = "";
  function busy(region) {
    var n = picks().filter(function (b) { return b.checked; }).length;
    if (n > 0) return n === 1 ? "1 row is ticked" : n + " rows are ticked";
    var f = document.activeElement;
    if (f && region.contains(f) && (/^(TEXTAREA|SELECT)$/.test(f.tagName) ||
        (f.tagName === "INPUT" && !/^(checkbox|radio|hidden|submit|button)$/.test(f.type)))) {
      return "you are typing";
    }
    var edited = Array.prototype.some.call(region.querySelectorAll("textarea, input, select"), function (x) {
      if (x.tagName === "SELECT") {
        return Array.prototype.some.call(x.options, function (o) { return o.selected !== o.defaultSelected; });
      }
      if (x.type === "checkbox" || x.type === "radio") return x.checked !== x.defaultChecked;
      if (x.type === "hidden" || x.type === "submit" || x.type === "button") return false;
      return x.value !== x.defaultValue;
    });
    return edited ? "a form here has changes not sent" : "";
  }
  document.addEventListener("htmx:beforeRequest", function (e) {
    var elt = e.detail && e.detail.elt;
    if (!elt || !elt.hasAttribute || !elt.hasAttribute("data-live")) return;
    held = paused ? "" : busy(elt);
    if (paused || held) {
      e.preventDefault();
    }
    liveStatus();
  });
  document.addEventListener("htmx:afterSettle", function (e) {
    var t = e.detail && e.detail.elt;
    if (t && t.hasAttribute && t.hasAttribute("data-live")) updated = Date.now();
  });
  function liveStatus() {
    var age = document.getElementById("live-age");
    if (!age) return;
    // The reason shows (and goes) at once, not only at the next poll.
    var region = document.querySelector("[data-live]");
    held = region && !paused ? busy(region) : "";
    var s = Math.max(0, Math.round((Date.now() - updated) / 1000));
    age.textContent = paused ? "updates paused: press Resume updates to go on"
      : held ? "updates paused while " + held + "; they go on by themselves after"
      : "updated " + s + " s ago";
  }
  document.addEventListener("DOMContentLoaded", function () {
    var btn = document.getElementById("live-pause");
    if (!btn) return;
    btn.hidden = false;
    btn.addEventListener("click", function () {
      paused = !paused;
      btn.textContent = paused ? "Resume updates" : "Pause updates";
      btn.setAttribute("aria-pressed", String(paused));
      liveStatus();
    });
    liveStatus();
    setInterval(liveStatus, 1000);
  });
  document.addEventListener("htmx:afterSettle", update);
  document.addEventListener("change", function () { liveStatus(); });
  document.addEventListener("htmx:afterSettle", function () { times(document); });
  document.addEventListener("DOMContentLoaded", function () { times(document); setInterval(ages, 5000); });

  // Moments in the reader's time zone; the exact UTC time stays on hover.
  var fmt = new Intl.DateTimeFormat(undefined, { year: "numeric", month: "short", day: "numeric",
    hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23", timeZoneName: "short" });
  function times(root) {
    root.querySelectorAll("time[data-local]").forEach(function (el) {
      var d = new Date(el.dateTime);
      if (!isNaN(d)) el.textContent = fmt.format(d);
    });
    ages();
  }

  // Relative ages, as the server writes them: 42s, 5m, 3h 12m, 4d 2h.
  function ages() {
    var now = Date.now();
    document.querySelectorAll("time[data-age]").forEach(function (el) {
      var t = new Date(el.dateTime).getTime();
      if (isNaN(t)) return;
      var s = Math.max(0, Math.floor((now - t) / 1000)), m = Math.floor(s / 60), h = Math.floor(m / 60);
      el.textContent = s < 60 ? s + "s" : m < 60 ? m + "m" : h < 48 ? h + "h " + (m % 60) + "m"
        : Math.floor(h / 24) + "d " + (h % 24) + "h";
    });
  }
  document.addEventListener("DOMContentLoaded", update);
  document.addEventListener("DOMContentLoaded", restoreKept);

  // A form sent after the session expired comes back as a box of its own; when the
  // page has that very form, what was typed goes back into it and the box hides.
  function restoreKept() {
    var kept = document.getElementById("kept-form");
    if (!kept) return;
    var action = kept.getAttribute("data-action");
    var form = Array.prototype.slice.call(document.querySelectorAll("main form")).filter(function (f) {
      return !kept.contains(f) && f.getAttribute("action") === action;
    })[0];
    if (!form) return;
    var first = null;
    kept.querySelectorAll("[data-kept]").forEach(function (k) {
      var name = k.getAttribute("data-kept");
      form.querySelectorAll("[name]").forEach(function (el) {
        if (el.name !== name) return;
        if (el.type === "checkbox" || el.type === "radio") {
          if (el.value === k.value) el.checked = true;
        } else if (el.type !== "hidden" && el.type !== "submit") {
          el.value = k.value;
          if (!first && k.tagName === "TEXTAREA") first = el;
        }
      });
    });
    if (!first) return; // nothing typed to put back: the box stays
    kept.hidden = true;
    var note = document.createElement("p");
    note.className = "flash";
    note.id = "kept-note";
    note.textContent = "Your session had expired: what you typed is back in this form. It has not been sent yet.";
    form.insertBefore(note, form.firstChild);
    first.focus();
  }
})();
