// devtool's pages work without this script. It adds two things: sections marked data-refresh
// reload themselves (the environment's status, a namespace's environments), and a logs page
// follows new lines through a server-sent event stream.
(function () {
  'use strict';

  document.querySelectorAll('[data-refresh][id]').forEach(function (el) {
    var secs = parseInt(el.getAttribute('data-refresh'), 10) || 5;
    var busy = false;
    setInterval(function () {
      // Not while hidden, not while the reader is inside it (a focused link or button would be lost).
      if (busy || document.hidden || el.contains(document.activeElement)) { return; }
      busy = true;
      var u = new URL(window.location.href);
      u.searchParams.set('fragment', el.id);
      fetch(u.toString(), { credentials: 'same-origin', headers: { Accept: 'text/html' } })
        .then(function (r) { if (!r.ok) { throw new Error(String(r.status)); } return r.text(); })
        .then(function (html) { el.innerHTML = html; })
        .catch(function () { /* the next tick tries again */ })
        .then(function () { busy = false; });
    }, secs * 1000);
  });

  document.addEventListener('submit', function (e) {
    var msg = e.target.getAttribute && e.target.getAttribute('data-confirm');
    if (msg && !window.confirm(msg)) { e.preventDefault(); }
  });

  var log = document.getElementById('log');
  if (!log || !log.dataset.stream || !window.EventSource) { return; }
  var status = document.getElementById('log-status');
  var pause = document.getElementById('log-pause');
  var empty = document.getElementById('log-empty');
  var stamps = log.dataset.timestamps === '1';
  var max = 5000;
  var es = null;
  var paused = false;
  var held = [];

  function say(s) { if (status) { status.textContent = s; } }

  function item(d) {
    var li = document.createElement('li');
    var p = document.createElement('span');
    p.className = 'p c' + (d.c | 0);
    p.textContent = '[' + d.p + ']';
    li.appendChild(p);
    if (stamps && d.t) {
      li.appendChild(document.createTextNode(' '));
      var t = document.createElement('time');
      t.dateTime = d.t;
      t.textContent = d.t;
      li.appendChild(t);
    }
    li.appendChild(document.createTextNode(' ' + d.x));
    return li;
  }

  function add(lines) {
    var atEnd = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
    var frag = document.createDocumentFragment();
    lines.forEach(function (d) { frag.appendChild(item(d)); });
    log.appendChild(frag);
    while (log.childElementCount > max) { log.removeChild(log.firstElementChild); }
    if (empty) { empty.hidden = true; }
    if (atEnd) { log.scrollTop = log.scrollHeight; }
  }

  function start() {
    es = new EventSource(log.dataset.stream);
    es.onopen = function () {
      // The stream starts with the same last lines the page shows: replace them.
      log.textContent = '';
      held = [];
      say('Following new lines.');
    };
    es.onmessage = function (ev) {
      var d;
      try { d = JSON.parse(ev.data); } catch (e) { return; }
      if (paused) { held.push(d); return; }
      add([d]);
    };
    es.addEventListener('notice', function (ev) {
      try { say(JSON.parse(ev.data)); } catch (e) { /* ignore */ }
    });
    es.onerror = function () { say('The log stream was interrupted; reconnecting…'); };
  }

  if (pause) {
    pause.hidden = false;
    pause.addEventListener('click', function () {
      paused = !paused;
      pause.textContent = paused ? 'Resume' : 'Pause';
      say(paused ? 'Paused: new lines are kept until you resume.' : 'Following new lines.');
      if (!paused && held.length) { add(held); held = []; }
    });
  }
  log.scrollTop = log.scrollHeight;
  start();
})();
