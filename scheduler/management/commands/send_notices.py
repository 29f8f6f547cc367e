from scheduler.management.jobcommand import JobCommand


class Command(JobCommand):
    job_name = "send_notices"
