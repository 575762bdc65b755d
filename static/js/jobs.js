// A running job's elapsed time (templates/jobs/job_state.html) counts on between the page's refreshes:
// the server's figure when the element arrived, plus the time since (no clock of the browser's is trusted).
(() => {
  // As the `duration` filter writes it (apps/jobs/templatetags/job_pages.py).
  const duration = (seconds) => {
    if (seconds < 10) return `${seconds.toFixed(1)} s`;
    const whole = Math.floor(seconds);
    if (whole < 60) return `${whole} s`;
    if (whole < 3600) return `${Math.floor(whole / 60)} min ${String(whole % 60).padStart(2, "0")} s`;
    return `${Math.floor(whole / 3600)} h ${String(Math.floor((whole % 3600) / 60)).padStart(2, "0")} min`;
  };
  const arrived = new WeakMap();
  setInterval(() => {
    const now = performance.now();
    for (const element of document.querySelectorAll(".job-elapsed[data-elapsed]")) {
      if (!arrived.has(element)) arrived.set(element, now);
      element.textContent = duration(Number(element.dataset.elapsed) + (now - arrived.get(element)) / 1000);
    }
  }, 500);
})();
