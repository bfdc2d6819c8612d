"""The demo's stages, one module each: ``train`` (edit policy here, controls in child
processes), ``export`` (bundle + parity), ``deploy`` (ROS 2 graph), ``hil`` (firmware on a pty),
``evaluate`` (success rate against the controls). Each returns a
:class:`~edgerl.apps.demo.config.StageResult`."""
