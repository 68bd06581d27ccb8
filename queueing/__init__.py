"""The queue port, below the domain: the queue of each device class and its Redis connection
(``queues``), and the workers' presence records in Redis (``heartbeat``), which the domain reads to
say whether a class has workers online and the workers write. Imports Django's settings, django-rq,
rq and redis; nothing of the apps."""
