# Alert rules, alerts and their state-change rows arrive with the alerting engine.
