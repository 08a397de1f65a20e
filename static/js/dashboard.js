// oncehook's dashboard enhancements. Every page works without this file; it adds
// select-all and shift-click for the bulk form, a count of the rows selected,
// keeps htmx's polling from replacing a table while rows are selected, and the
// queues' keyboard shortcuts.
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

  // The undo a confirming message offers goes after a few seconds.
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("form[data-undo-seconds]").forEach(function (f) {
      setTimeout(function () { f.remove(); }, 1000 * Number(f.getAttribute("data-undo-seconds")));
    });
  });

  // The queues' keyboard: j/k move, x ticks, Enter opens (the row's link has the
  // focus), a assigns to me, r asks for Retry through its confirmation page, /
  // searches, ? lists the keys. Nothing fires while typing in a field or with a
  // modifier held; what a key did, or why not, is said in #kb-status.
  var focusedID = "";
  function rows() {
    return Array.prototype.slice.call(document.querySelectorAll("#queue-table tbody tr[data-id]"));
  }
  function say(msg) {
    var s = document.getElementById("kb-status");
    if (s) s.textContent = msg;
  }
  function focusRow(tr) {
    rows().forEach(function (r) { r.classList.remove("kb-focus"); });
    if (!tr) return;
    tr.classList.add("kb-focus");
    focusedID = tr.getAttribute("data-id");
    var link = tr.querySelector("a[id^=open-]");
    if (link) link.focus();
  }
  function currentRow() {
    var all = rows();
    for (var i = 0; i < all.length; i++) {
      if (all[i].getAttribute("data-id") === focusedID) return all[i];
    }
    return null;
  }
  function typing(t) {
    return t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
  }
  function post(url, fields) {
    var token = document.querySelector("input[name=csrf_token]");
    var f = document.createElement("form");
    f.method = "post";
    f.action = url;
    fields.csrf_token = token ? token.value : "";
    Object.keys(fields).forEach(function (k) {
      var i = document.createElement("input");
      i.type = "hidden";
      i.name = k;
      i.value = fields[k];
      f.appendChild(i);
    });
    document.body.appendChild(f);
    f.submit();
  }
  document.addEventListener("keydown", function (e) {
    var keys = document.getElementById("keys");
    if (!keys || e.ctrlKey || e.metaKey || e.altKey || typing(e.target)) return;
    if (keys.open) return; // the dialog has Esc, and its button
    var all = rows(), tr = currentRow(), i = all.indexOf(tr);
    switch (e.key) {
      case "j":
      case "k":
        if (all.length === 0) return;
        i = e.key === "j" ? Math.min(all.length - 1, i + 1) : Math.max(0, i < 0 ? 0 : i - 1);
        focusRow(all[i]);
        break;
      case "x":
        if (!tr) { say("Move to a row first: j or k."); break; }
        var box = tr.querySelector("input[type=checkbox][name=id]");
        if (!box) { say("Rows cannot be ticked here."); break; }
        box.click();
        say((box.checked ? "Ticked " : "Unticked ") + tr.querySelector("a[id^=open-]").textContent + ".");
        break;
      case "a":
        if (!tr) { say("Move to a row first: j or k."); break; }
        var me = document.getElementById("main").getAttribute("data-me");
        if (!tr.getAttribute("data-assign") || !me) { say("Only admins can assign actions."); break; }
        post(tr.getAttribute("data-assign"), { owner: me });
        break;
      case "r":
        if (!tr) { say("Move to a row first: j or k."); break; }
        if (!tr.getAttribute("data-retry")) { say("This action cannot be retried now; open it to see why."); break; }
        window.location.href = tr.getAttribute("data-retry");
        break;
      case "/":
        var q = document.getElementById("f-q");
        if (!q) return;
        var tool = document.getElementById("filter-tool");
        if (tool) tool.open = true;
        q.focus();
        dropSlash = true;
        break;
      case "?":
        keys.showModal();
        break;
      default:
        return;
    }
    e.preventDefault();
  });
  // The "/" that moved the focus to the search is not typed into it (a browser
  // whose keydown's preventDefault already kept it out sends no keypress).
  var dropSlash = false;
  document.addEventListener("keypress", function (e) {
    if (dropSlash && e.key === "/") e.preventDefault();
    dropSlash = false;
  }, true);
  document.addEventListener("keyup", function (e) {
    if (e.key === "/") dropSlash = false;
  }, true);
  // A poll replaces the rows: the focus comes back to the same action's row.
  document.addEventListener("htmx:afterSettle", function () {
    if (focusedID && document.activeElement === document.body) focusRow(currentRow());
  });
})();
