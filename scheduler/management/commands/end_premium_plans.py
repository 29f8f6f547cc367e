from scheduler.management.jobcommand import JobCommand


class Command(JobCommand):
    job_name = "end_premium_plans"
