"""ament_python package for edgerl's ROS 2 nodes (``colcon build`` or ``pip install -e``)."""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = "edgerl_ros"

#: executable name -> "module:function"; the launch file and ``edgerl deploy`` use these names.
NODES = {
    "edit_policy_node": "edgerl_ros.edit_policy_node:main",
    "planner_node": "edgerl_ros.planner_node:main",
    "sim_robot_node": "edgerl_ros.sim_robot_node:main",
    "serial_bridge_node": "edgerl_ros.serial_bridge_node:main",
    "ros2_control_bridge_node": "edgerl_ros.ros2_control_bridge_node:main",
    # the sim robot and the edit node composed in one process (edgerl deploy --compose)
    "robot_edit_container": "edgerl_ros.container:main",
}

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.launch.py")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml")),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="edgerl developers",
    maintainer_email="edgerl@example.com",
    description="ROS 2 nodes for edgerl (edit policy, planner, sim robot, serial bridge)",
    license="Apache-2.0",
    entry_points={"console_scripts": [f"{name} = {target}" for name, target in NODES.items()]},
)
