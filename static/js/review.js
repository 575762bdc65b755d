// Keyboard shortcuts of the review page (shortcuts.js says when they act).
pageShortcuts("review", function (find) {
  "use strict";

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

  return {
    a: () => press("#accept"),
    r: reject,
    e: edit,
    j: () => press("#queue-next"),
    k: () => press("#queue-previous"),
  };
});
