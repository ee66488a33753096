"""Changes tuned one lever at a time, their measurements and charts, and prevention actions."""
