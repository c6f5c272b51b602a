"""The RM's queues and what meters them: the dispatcher, inbound admission, timers."""
