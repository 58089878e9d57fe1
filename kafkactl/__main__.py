from kafkactl.main import run

run()
