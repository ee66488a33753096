"""Alert intake: Alertmanager notifications recorded, routed by rules, turned into one incident per target."""
