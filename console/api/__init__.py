"""The REST API: one APIView per operation, nested Input/Output serializers, one error shape."""
