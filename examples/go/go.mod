module kiln.example/routes

go 1.19
