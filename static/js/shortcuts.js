// Keyboard shortcuts of a page, the one way every page has them: they act only when no text field has
// the focus (Esc leaves one), once per key press, and not while the help dialog (#shortcuts, opened
// by ? or #shortcuts-open) is on top. Every action is also a plain button, radio button or link, so
// the pages work without scripts. A page calls pageShortcuts(its root's id, {key: action}); an action
// returns true when it did something.
(function () {
  "use strict";

  // Fields that take letters; radio buttons and checkboxes do not, so shortcuts work on them.
  const TYPED = "textarea, select, [contenteditable]:not([contenteditable='false']), " +
    "input:not([type=radio]):not([type=checkbox]):not([type=submit]):not([type=button]):not([type=hidden])";

  window.pageShortcuts = function (rootId, actions) {
    function find(selector) {
      const root = document.getElementById(rootId);
      return root ? root.querySelector(selector) : null;
    }

    function help() {
      const dialog = find("#shortcuts");
      if (!dialog) return false;
      if (dialog.open) dialog.close(); else dialog.showModal();
      return true;
    }

    const all = Object.assign({ "?": help }, actions(find));

    document.addEventListener("keydown", function (event) {
      // 229: an input method is composing (Safari).
      if (event.ctrlKey || event.metaKey || event.altKey || event.isComposing || event.keyCode === 229) return;
      if (event.repeat) return;
      if (event.target && event.target.closest && event.target.closest(TYPED)) {
        if (event.key === "Escape") event.target.blur();
        return;
      }
      const dialog = find("#shortcuts");
      if (dialog && dialog.open && event.key !== "?") return; // the help is on top: only ? (or Esc) closes it
      const action = all[event.key];
      if (action && action()) event.preventDefault();
    });

    document.addEventListener("click", function (event) {
      if (event.target.closest && event.target.closest("#shortcuts-open")) help();
    });
  };
})();
