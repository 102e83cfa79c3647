"""The Deployment controller (upstream pkg/controller/deployment), one module per upstream file:
controller (informers, handlers, syncDeployment), sync, rolling, recreate, progress, rollback,
and util (deploymentutil)."""

from controllers.deployment.controller import CONTROLLER_NAME, DeploymentController

__all__ = ["CONTROLLER_NAME", "DeploymentController"]
