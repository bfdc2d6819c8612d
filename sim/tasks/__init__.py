"""edgerl's built-in tasks, declared as data: the registry registers them on first use (no
backend imports here)."""

from __future__ import annotations

from edgerl.sim.task_info import TaskInfo

__all__ = ["BUILTIN_TASKS", "TASK_FAMILIES"]

#: edgerl's own tasks.
BUILTIN_TASKS: tuple[TaskInfo, ...] = (
    TaskInfo(
        name="cartpole", backend="torch", obs_dim=4, action_dim=1, control_hz=50.0,
        description="cart-pole balancing (torch, smoke/demo task, LQR expert)",
        entry_point="edgerl.sim.tasks.cartpole:make_cartpole"),
    TaskInfo(
        name="cartpole_goal", backend="torch", obs_dim=5, action_dim=1, control_hz=50.0,
        description="cart-pole to a goal position only the planner sees (torch, planner-needed "
                    "demo task)",
        entry_point="edgerl.sim.tasks.cartpole:make_cartpole_goal"),
    TaskInfo(
        name="arm_reach", backend="mujoco", obs_dim=16, action_dim=2, control_hz=50.0,
        description="language-conditioned planar-arm reaching, 4 coloured targets (MuJoCo, VLA "
                    "task)",
        entry_point="edgerl.sim.tasks.arm:make_arm_reach",
        language="edgerl.sim.tasks.arm_language"),
    TaskInfo(
        name="ball_balance", backend="mujoco", obs_dim=12, action_dim=2, control_hz=50.0,
        description="ball on a tilting plate, moving target, random kicks (MuJoCo, contact)",
        entry_point="edgerl.sim.tasks.ball:make_ball_balance"),
    TaskInfo(
        name="ball_goal", backend="mujoco", obs_dim=12, action_dim=2, control_hz=50.0,
        description="ball on a tilting plate to a still goal only the planner sees, random kicks "
                    "(MuJoCo, planner-needed task)",
        entry_point="edgerl.sim.tasks.ball:make_ball_goal"),
    TaskInfo(
        name="arm_push", backend="mujoco", obs_dim=15, action_dim=3, control_hz=50.0,
        description="language-conditioned planar-arm pushing, 3 coloured pucks x 4 directions "
                    "(MuJoCo, contact)",
        entry_point="edgerl.sim.tasks.arm_push:make_arm_push"),
    TaskInfo(
        name="driving", backend="torch", obs_dim=10, action_dim=2, control_hz=20.0,
        description="multi-agent bicycle-model driving, curved 3-lane road, dry/wet/ice, "
                    "kinematic|dynamic (torch)",
        entry_point="edgerl.sim.tasks.driving:make_driving"),
)

#: Task families: names with the prefix are described on first use (``gym:<EnvId>``, ...).
TASK_FAMILIES: dict[str, str] = {
    "gym:": "edgerl.sim.adapters.gymnasium:describe_gym_task",
    "dmc:": "edgerl.sim.adapters.dm_control:describe_dmc_task",
    "mjlab:": "edgerl.sim.adapters.rsl_rl_wrapper:describe_mjlab_task",
    "isaaclab:": "edgerl.sim.adapters.rsl_rl_wrapper:describe_isaaclab_task",
}
