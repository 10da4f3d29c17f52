// The approvals page's script: the parked calls kept current through
// server-sent events (`GET /events`), each call's time left counted down,
// and Approve / Deny sent with the session's CSRF token without leaving
// the page. Every fragment it places was rendered and escaped by the
// gateway; the script itself never reads text from a call.
"use strict";

(function () {
  const pending = document.getElementById("pending");
  if (!pending) {
    return; // The sign-in form: nothing to keep current.
  }
  const csrf = document.querySelector('meta[name="csrf"]').content;
  const live = document.getElementById("live");
  // Counted from when each fragment arrived, with the gateway's own
  // "time left", so a browser's clock that is off does not matter.
  let placedAt = performance.now();

  function countDown() {
    const elapsed = performance.now() - placedAt;
    for (const left of pending.querySelectorAll(".left[data-left-ms]")) {
      const ms = Number(left.dataset.leftMs) - elapsed;
      const secs = Math.max(0, Math.floor(ms / 1000));
      left.textContent = secs === 0
        ? "expiring"
        : Math.floor(secs / 60) + ":" + String(secs % 60).padStart(2, "0") + " left";
    }
  }
  setInterval(countDown, 1000);

  function title() {
    const calls = document.getElementById("calls");
    const count = calls ? Number(calls.dataset.count) : 0;
    document.title = count > 0 ? "(" + count + ") Approvals" : "Approvals";
  }
  title();

  function setLive(on, words) {
    live.textContent = words;
    live.classList.toggle("on", on);
  }

  const events = new EventSource("/events");
  events.addEventListener("open", function () {
    setLive(true, "live");
  });
  events.addEventListener("error", function () {
    setLive(false, "reconnecting…");
  });
  events.addEventListener("pending", function (event) {
    pending.innerHTML = event.data;
    placedAt = performance.now();
    countDown();
    title();
  });
  events.addEventListener("signed-out", function () {
    events.close();
    window.location.assign("/approvals");
  });

  // Approve and Deny without leaving the page: the same POST the form
  // would send, with the token as a header; the events then take the
  // call off the list.
  pending.addEventListener("submit", async function (event) {
    const form = event.target.closest("form[data-decide]");
    if (!form) {
      return;
    }
    event.preventDefault();
    const card = form.closest(".call");
    const outcome = card.querySelector(".outcome");
    for (const button of card.querySelectorAll("button")) {
      button.disabled = true;
    }
    outcome.textContent = "sending…";
    try {
      const answer = await fetch(form.action, {
        method: "POST",
        headers: { "X-CSRF-Token": csrf },
        credentials: "same-origin",
      });
      const body = await answer.json().catch(function () { return {}; });
      if (answer.ok) {
        card.classList.add("decided");
        outcome.textContent = body.decision || "decided";
      } else {
        outcome.textContent = body.error || ("refused: HTTP " + answer.status);
        for (const button of card.querySelectorAll("button")) {
          button.disabled = false;
        }
      }
    } catch (error) {
      outcome.textContent = "not sent: " + error;
      for (const button of card.querySelectorAll("button")) {
        button.disabled = false;
      }
    }
  });
})();
