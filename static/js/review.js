// Keyboard shortcuts of the review page. They act only when no text field has the focus, so typing
// an issue or a note never triggers one; Esc leaves a field. Every action is also a plain button or
// link, so the page works without this script.
(function () {
  "use strict";

  // Fields that take letters; radio buttons and checkboxes do not, so shortcuts work on them.
  const TYPED = "textarea, select, [contenteditable]:not([contenteditable='false']), " +
    "input:not([type=radio]):not([type=checkbox]):not([type=submit]):not([type=button]):not([type=hidden])";

  function typing(element) {
    return element && element.closest && element.closest(TYPED);
  }

  function find(selector) {
    const review = document.getElementById("review");
    return review ? review.querySelector(selector) : null;
  }

  function press(selector) {
    const element = find(selector);
    if (element) element.click(); // a click, so htmx sends the button's name and value
    return Boolean(element);
  }

  function reject() {
    const reason = find("#id_reject_reason");
    if (reason && !reason.value) {
      const hint = find("#reject-hint");
      if (hint) hint.hidden = false;
      reason.focus();
      return true;
    }
    return press("#reject");
  }

  function edit() {
    const text = find("#issue-text");
    if (!text) return false;
    text.focus();
    text.setSelectionRange(text.value.length, text.value.length);
    return true;
  }

  function help() {
    const dialog = find("#shortcuts");
    if (!dialog) return false;
    if (dialog.open) dialog.close(); else dialog.showModal();
    return true;
  }

  const actions = {
    a: () => press("#accept"),
    r: reject,
    e: edit,
    j: () => press("#queue-next"),
    k: () => press("#queue-previous"),
    "?": help,
  };

  document.addEventListener("keydown", function (event) {
    // A held key repeats: one decision per press. 229: an input method is composing (Safari).
    if (event.ctrlKey || event.metaKey || event.altKey || event.isComposing || event.keyCode === 229) return;
    if (event.repeat) return;
    if (typing(event.target)) {
      if (event.key === "Escape") event.target.blur();
      return;
    }
    const dialog = find("#shortcuts");
    if (dialog && dialog.open && event.key !== "?") return; // the help is on top: only ? (or Esc) closes it
    const action = actions[event.key];
    if (action && action()) event.preventDefault();
  });

  document.addEventListener("click", function (event) {
    if (event.target.closest && event.target.closest("#shortcuts-open")) help();
  });
})();
