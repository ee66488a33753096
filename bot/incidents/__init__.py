"""Incidents: the lifecycle service and the policy that says who may do what."""
