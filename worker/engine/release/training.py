"""Training data made from a release's tasks: an agent's successful trajectories as chat messages,
and rows a judge learns from (the issue, a patch, its trajectory where there is one, and whether it
resolves the task, with who said so). The schema of each row is in the README."""

from typing import Optional

SYSTEM = ("You are a software engineer working in a checkout of the repository {repo}. Resolve the issue the user "
          "describes by changing the repository's source; the final patch is graded by tests you cannot see.")


def trajectory_messages(*, repo: str, problem_statement: str, steps: list[dict]) -> list[dict]:
    """The trajectory as a conversation: the agent's thought and action as the assistant's turn,
    what the action printed as the next user turn. Empty parts are left out."""
    messages = [{"role": "system", "content": SYSTEM.format(repo=repo)},
                {"role": "user", "content": problem_statement}]
    for step in steps:
        action = step.get("action", "")
        said = "\n\n".join(part for part in (step.get("thought", ""), f"```\n{action}\n```" if action else "") if part)
        if said:
            messages.append({"role": "assistant", "content": said})
        if step.get("observation"):
            messages.append({"role": "user", "content": step["observation"]})
    return messages


def trajectory_row(*, instance_id: str, candidate_id: int, run: str, repo: str, problem_statement: str,
                   steps: list[dict], patch: str) -> dict:
    return {"instance_id": instance_id, "candidate_id": candidate_id, "run": run,
            "messages": trajectory_messages(repo=repo, problem_statement=problem_statement, steps=steps),
            "patch": patch}


def judge_row(*, instance_id: str, candidate_id: int, source: str, run: str, problem_statement: str, patch: str,
              steps: Optional[list[dict]], resolved: bool, label_source: str) -> dict:
    return {"instance_id": instance_id, "candidate_id": candidate_id, "source": source, "run": run,
            "problem_statement": problem_statement, "patch": patch, "trajectory": steps or None,
            "label": resolved, "label_source": label_source}
